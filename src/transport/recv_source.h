// Where an incoming message lands: the head of the QP's own receive queue,
// or a WQE taken from its shared receive queue (for an XRC target QP, the
// SRQ the sender named, bound by transport/xrc.cpp just before). The responder (RC/UC) and
// the datagram receiver (UD) both ask here, so the SRQ rules live in one
// place. Every function expects the caller to hold qp.lock.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>
#include <sys/uio.h>

#include "core/qp.h"

namespace softrdma {
class Engine;
}

namespace softrdma::transport {

struct RecvSlot {
  RecvWqe* wqe = nullptr;
  ibv_sge* sges = nullptr;
  uint32_t pd_id = 0;  // the PD its lkeys must belong to (the SRQ's for an SRQ WQE)
};

// false = no receive WQE (RNR for RC; UC and UD drop the message). Taking
// from an SRQ happens here and only here; the WQE then stays with the QP
// until ConsumeRecv, so a message in fragments keeps its WQE.
bool AcquireRecv(Qp& qp, RecvSlot* slot);
// The message is done (completed, successfully or not): the WQE is used up.
void ConsumeRecv(Qp& qp);
// The WQE's buffers as iovecs in our address space, truncated to `len`
// bytes. Returns the count, or -1 on a bad lkey/bound/access.
int ResolveRecv(Engine& engine, const RecvSlot& slot, uint64_t len, iovec* out);
// Sum of the WQE's SGE lengths.
uint64_t RecvCapacity(const RecvSlot& slot);
// The QP entered ERR: a WQE it holds from its SRQ is flushed on its CQ, and
// IBV_EVENT_QP_LAST_WQE_REACHED tells the application that no further SRQ
// WQE will be consumed by this QP (the SRQ's own WQEs are not touched).
void OnSrqQpError(Qp& qp);

}  // namespace softrdma::transport
