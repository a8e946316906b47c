// Shared receive queue: one pool of receive WQEs that several QPs draw from.
// A QP takes a WQE only when a message is about to be placed (never ahead of
// time), so WQEs are consumed in the order they were posted, whichever QP
// the message arrives on. The QP then owns the WQE (Qp::srq_wqe) until the
// message completes; if the QP fails first, that WQE is flushed on the QP's
// CQ and the SRQ itself is left alone (docs/qp-state-machine.md §6).
//
// Lock order: Qp::lock before Srq::lock (the responder holds the QP's lock
// when it takes a WQE); posting takes only the SRQ's lock.
#pragma once

#include <atomic>
#include <cstdint>

#include <infiniband/verbs.h>

#include "core/objects.h"
#include "core/qp.h"
#include "util/spinlock.h"

namespace softrdma {

struct Xrcd;

class Srq {
 public:
  // rdma-core's verbs_srq starts with the ibv_srq; ours holds the same first
  // member, so the pointer the application holds converts back with a cast.
  ibv_srq srq;

  static Srq* From(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }
  ibv_srq* verbs() { return &srq; }

  Srq(Context* ctx, Pd* pd, uint32_t max_wr, uint32_t max_sge, uint32_t srq_num);

  int Post(ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  // Moves the oldest WQE into *wqe / sges (room for max_sge() entries).
  // false = the SRQ is empty. Raises IBV_EVENT_SRQ_LIMIT_REACHED when the
  // count falls below an armed limit, and disarms it.
  bool Take(RecvWqe* wqe, ibv_sge* sges);
  bool Empty() const;
  int Modify(const ibv_srq_attr& attr, int mask);
  void Query(ibv_srq_attr* attr) const;
  uint32_t max_sge() const { return max_sge_; }
  uint32_t srq_num() const { return srq_num_; }
  Context* ctx() const { return ctx_; }
  Pd* pd() const { return pd_; }
  // XRC SRQs (core/verbs_xrc.cpp) get a host-unique number after creation.
  void set_srq_num(uint32_t n) { srq_num_ = n; }

  // XRC only: the domain whose target QPs may deliver here, and the CQ that
  // receives its completions (an XRC target QP has no CQ of its own).
  Xrcd* xrcd = nullptr;
  Cq* cq = nullptr;

  std::atomic<int> users{0};     // QPs attached: destroy fails with EBUSY
  AsyncEventCount async_events;  // its SRQ events (core/async_events.h)

 private:
  Context* ctx_;
  Pd* pd_;
  uint32_t max_sge_;
  uint32_t srq_num_;
  mutable SpinLock lock_;
  WorkQueue<RecvWqe> q_;
  uint32_t limit_ = 0;  // 0 = not armed
};
static_assert(offsetof(Srq, srq) == 0);

}  // namespace softrdma
