// The extended QP work-request API (ibv_wr_start ... ibv_wr_complete).
//
// A batch is built into storage owned by the QP (WrBatch): one ibv_send_wr
// per WR with its SGE and inline-data slots, sized to max_send_wr at QP
// creation, so posting allocates nothing. ibv_wr_complete checks the whole
// batch with the transport's own rules and then hands it to the same
// transport::PostSend that ibv_post_send uses, under the QP lock: a batch is
// posted entirely or not at all.
#pragma once

#include <cstdint>
#include <memory>

#include <infiniband/verbs.h>

#include "util/spinlock.h"

namespace softrdma {

class Qp;

struct WrBatch {
  // ibv_wr_start .. ibv_wr_complete/abort is a per-QP critical section
  // (ibv_wr_post(3)). It is a lock of its own, not Qp::lock, so that the
  // progress thread is never held up by an application building a batch.
  SpinLock session;

  uint32_t capacity = 0;  // WRs per batch (= max_send_wr)
  uint32_t max_sge = 0;   // SGE slots per WR
  uint32_t max_inline = 0;
  // capacity + 1 slots: the extra one absorbs WRs beyond the capacity, whose
  // batch then fails with ENOMEM at ibv_wr_complete.
  std::unique_ptr<ibv_send_wr[]> wrs;
  std::unique_ptr<ibv_sge[]> sges;
  std::unique_ptr<uint8_t[]> inline_data;

  uint32_t count = 0;          // WRs started in this batch
  ibv_send_wr* cur = nullptr;  // the WR the address/SGE setters apply to
  uint32_t cur_index = 0;
  int error = 0;  // first error seen while building; reported by wr_complete

  ibv_sge* sge_slot(uint32_t index) { return &sges[static_cast<size_t>(index) * max_sge]; }
  uint8_t* inline_slot(uint32_t index) {
    return &inline_data[static_cast<size_t>(index) * max_inline];
  }
};

// Allocates the batch storage and fills the qp_ex function table.
// Returns 0 or ENOMEM.
int EnableWrApi(Qp& qp);

}  // namespace softrdma
