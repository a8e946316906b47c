// XRC on the RC transport. An XRC initiator QP (IBV_QPT_XRC_SEND) is an RC
// requester whose every request also names a target SRQ; an XRC target QP
// (IBV_QPT_XRC_RECV) is an RC responder with no receive queue of its own:
// each message lands in the SRQ it names, which must be of the target QP's
// XRC domain, and completes on that SRQ's CQ.
//
// SRQ numbers are host-unique (drawn from the registry's QPN space, so the
// registry also records which process owns each one). The SRQ named must
// live in the process that owns the target QP: that is where the message
// arrives.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

#include "core/qp.h"

namespace softrdma {
class Srq;
struct Xrcd;
}  // namespace softrdma

namespace softrdma::transport {

// This process's XRC SRQs by number, for the responder.
void RegisterXrcSrq(Srq* srq);
void UnregisterXrcSrq(Srq* srq);

// This process's XRC target QPs by number, for ibv_open_qp. A target QP
// has one handle per creator/opener and is destroyed with the last one.
void RegisterXrcTarget(Qp* qp);
// Adds a handle to target `qpn` if it is here and of `xrcd`'s domain.
Qp* OpenXrcTarget(uint32_t qpn, const Xrcd& xrcd);
// Drops a handle: true while others remain (then nothing is destroyed).
bool ReleaseXrcTargetHandle(Qp* qp);

// Responder, caller holds qp.lock: points qp.srq / qp.recv_cq at the SRQ
// numbered `srqn`. A QP already holding a WQE (a message in fragments) keeps
// its SRQ. false = no XRC SRQ of that number here, or one of another domain:
// the requester gets an Invalid Request NAK (see docs/design.md, XRC).
bool BindXrcSrq(Qp& qp, uint32_t srqn);
// The message is placed (or nothing was there to take): let the SRQ go.
void UnbindXrcSrq(Qp& qp);

// Post-time rule of an XRC initiator: 0 or EOPNOTSUPP (only SEND and
// SEND_WITH_IMM carry a target SRQ here so far).
int CheckXrcSendWr(const Qp& qp, const ibv_send_wr& wr);

}  // namespace softrdma::transport
