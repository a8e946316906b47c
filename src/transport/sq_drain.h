// The SQD state's drain (IBA 10.3.1 "Send Queue Drain"; man ibv_modify_qp,
// ibv_query_qp): on entering SQD the send WQEs already started finish (for
// RC, until acknowledged, retransmissions included) and those not started
// wait for the return to RTS. When the last started one completes, the QP
// raises IBV_EVENT_SQ_DRAINED if en_sqd_async_notify was set in the modify
// to SQD; ibv_query_qp's sq_draining reads 1 until then.
// Every function expects the caller to hold qp.lock.
#pragma once

#include <cstdint>

#include "core/qp.h"

namespace softrdma::transport {

// RTS -> SQD: marks the started WQEs as the drain, raises the event at once
// if none is outstanding.
void BeginSqDrain(Qp& qp, bool notify);

// Out of the data path: the drain ended if its last WQE was retired.
void FinishSqDrainIfDone(Qp& qp);

// Called after send WQEs were retired: a check only in SQD.
inline void NoteSendsRetired(Qp& qp) {
  if (qp.state == IBV_QPS_SQD) [[unlikely]]
    FinishSqDrainIfDone(qp);
}

// Whether the QP is in SQD with started WQEs not complete (sq_draining).
inline bool SqDraining(const Qp& qp) {
  return qp.state == IBV_QPS_SQD && qp.sq_draining;
}

// Where transmission stops: the end of the queue in RTS; in SQD the end of
// the drain (a WQE started before SQD is finished or resent after a rewind;
// no new one starts).
inline uint32_t TransmitEnd(const Qp& qp) {
  return qp.state == IBV_QPS_RTS ? qp.sq.head : qp.sq_drain_end;
}

// Whether Transmit has anything it may send in the QP's state: RTS, or SQD
// with part of the drain not sent (yet, or again after a rewind).
inline bool MayTransmit(const Qp& qp) {
  return qp.state == IBV_QPS_RTS || (qp.state == IBV_QPS_SQD && qp.sq_tx != qp.sq_drain_end);
}

}  // namespace softrdma::transport
