// What the RoCE completer needs of the requester: how many PSNs a WQE
// takes, and the go-back-N restart.
#pragma once

#include <cstdint>

#include "core/qp.h"

namespace softrdma::transport::roce {

inline bool IsAtomicOp(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
inline bool IsReadOrAtomic(ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_READ || IsAtomicOp(op);
}
// PSNs a WQE takes: one per packet (a READ: one per response packet).
uint32_t WqePackets(const SendWqe& w, uint32_t mtu);
// Restarts transmission from the oldest WQE not acknowledged, skipping its
// acknowledged packets (go-back-N).
void Rewind(Qp& qp);
// The retransmit timer counts from now: a response made progress, or the
// oldest WQE starts out. Stamped where it happens (one vDSO clock read),
// not when the timer next looks, so that the timer is never late by the
// period of its checks (docs/design.md "RoCEv2 transport", Survivors).
// With sends outstanding, the first tail-loss probe's due time goes to the
// engine (Engine::TimerDueBy), so that the progress thread wakes for it.
void RestartRetransmitTimer(Engine& engine, Qp& qp);
// A tail-loss probe now (RTS/SQD, while probes remain for this wait for
// progress), not at its due time: an ACK that may be a NAK repeat asks for
// one (roce_completer.cpp, OnAckPacket).
void SendTailProbeNow(Engine& engine, Qp& qp);
// Packets with AckReq set that were sent with a PSN after `psn` (before a
// go-back-N restart: what the responder may still answer).
uint32_t AckReqPacketsSentAfter(Qp& qp, uint32_t psn);

}  // namespace softrdma::transport::roce
