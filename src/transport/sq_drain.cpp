// SQD's drain: see sq_drain.h.
#include "transport/sq_drain.h"

#include "core/objects.h"

namespace softrdma::transport {

void BeginSqDrain(Qp& qp, bool notify) {
  // A WQE was started if it got its PSN (at its first transmission, both
  // wires; PostSend clears it). sq_tx alone is not the end of what was
  // started: a rewind (RNR NAK, sequence NAK, retransmit timeout) moved it
  // back to the oldest unacknowledged WQE, and those after it, sent before,
  // are resent from there. WQEs start in order, so the started ones are
  // contiguous. Operations without a PSN (executed directly at the head,
  // local operations, UD sends) complete as they start.
  uint32_t end = qp.sq_tx;
  while (end != qp.sq.head && qp.sq.at(end).has_psn) ++end;
  qp.sq_drain_end = end;
  // A WQE waiting to start (ring full, fence, initiator depth) waits for
  // RTS now, not for the peer: the retransmit timer must not count it as
  // outstanding (the return to RTS transmits, and blocks again if need be).
  if (qp.sq_tx == end) qp.tx_blocked = false;
  qp.sq_drain_notify = notify;
  qp.sq_draining = true;
  FinishSqDrainIfDone(qp);
}

void FinishSqDrainIfDone(Qp& qp) {
  if (!qp.sq_draining || static_cast<int32_t>(qp.sq.tail - qp.sq_drain_end) < 0) return;
  qp.sq_draining = false;
  if (qp.sq_drain_notify) PostAsyncEvent(qp.ctx, IBV_EVENT_SQ_DRAINED, qp.verbs());
}

}  // namespace softrdma::transport
