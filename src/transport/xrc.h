// XRC on the RC transport. An XRC initiator QP (IBV_QPT_XRC_SEND) is an RC
// requester whose every request also names a target SRQ; an XRC target QP
// (IBV_QPT_XRC_RECV) is an RC responder with no receive queue of its own:
// each message lands in the SRQ it names, which must be of the target QP's
// XRC domain, and completes on that SRQ's CQ.
//
// SRQ numbers are host-unique (drawn from the registry's QPN space, so the
// registry also records which process owns each one). A message arrives
// in the process that owns the target QP; if the SRQ it names lives in
// another process of the domain, the target's process hands it over
// (transport/xrc_forward.cpp) and answers the requester once that process
// reports the outcome.
//
// RDMA WRITE/READ and atomics through a target QP are checked against the
// PD of the SRQ the request names (the target QP has no PD), as IBA's XRC
// rules say; WRITE_WITH_IMM consumes a receive WQE of that SRQ. The
// initiator executing them directly finds that PD in the SRQ's published
// entry (host/published_qp.h); the two-copy responder binds the SRQ as
// for a SEND.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

#include "core/qp.h"
#include "host/published_qp.h"
#include "transport/messages.h"
#include "wire/shm/ring.h"

namespace softrdma {
class Engine;
class Registry;
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

// This process's XRC SRQ numbered `srqn`, held (counted as a user, so it is
// not destroyed) until ReleaseXrcSrq; nullptr if there is none.
Srq* AcquireXrcSrq(uint32_t srqn);
void ReleaseXrcSrq(Srq* srq);

// Responder, caller holds qp.lock: points qp.srq / qp.recv_cq at the SRQ
// numbered `srqn`. A QP already holding a WQE (a message in fragments) keeps
// its SRQ. false = no XRC SRQ of that number here, or one of another domain:
// the requester gets an Invalid Request NAK (see docs/design.md, XRC).
bool BindXrcSrq(Qp& qp, uint32_t srqn);
// The message is placed (or nothing was there to take): let the SRQ go.
void UnbindXrcSrq(Qp& qp);

// --- Delivery to an SRQ of another process (xrc_forward.cpp)
enum class XrcForward {
  kNowhere,    // no SRQ of that number in the target's domain anywhere
  kForwarded,  // handed over; OnXrcDone answers the requester
  kBlocked,    // that process's ring is full: dropped, the requester retries
};
// Target's process, caller holds qp.lock: the SEND `req` names an SRQ that
// is not ours. While the outcome is awaited the QP does not advance (later
// PSNs are dropped as from the future; retransmissions are handed over
// again and recognised by the SRQ's process).
XrcForward ForwardXrcRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                             const shm::RecordView& view);
// SRQ's process (a kXrcForward record, from the ring consumer): places the
// message in a WQE of the SRQ, completes it on the SRQ's CQ and reports.
void OnXrcForward(Engine& engine, const wire::RecordHeader& fwd, const shm::RecordView& view);
// Target's process, caller holds qp.lock: the outcome arrived. true = the
// message is done and the requester is owed an ACK.
bool OnXrcDone(Engine& engine, Qp& qp, const wire::RecordHeader& done);
// The SRQ is being destroyed: forgets a message in fragments holding one of
// its WQEs.
void ForgetXrcForwards(const Srq* srq);

// Post-time rule of an XRC initiator: 0 or EOPNOTSUPP (SEND, SEND_WITH_IMM,
// RDMA WRITE/WRITE_WITH_IMM/READ and the two atomics carry a target SRQ).
int CheckXrcSendWr(const Qp& qp, const ibv_send_wr& wr);

// Publishes an XRC SRQ's entry (its PD and domain) for initiators, or
// withdraws it before its number is freed.
void PublishXrcSrq(Engine& engine, const Srq& srq, bool destroyed = false);

// Initiator, direct execution through an XRC target whose published entry
// is `target`: the PD the rkey must belong to is that of SRQ `srqn`, which
// must be published by the target's process and be of the target's domain.
// false = it is not (unknown, gone, elsewhere or foreign): the request
// takes the ring, where the responder answers it (an invalid request).
bool XrcRequestPd(const Registry& registry, const QpSnapshot& target, uint32_t srqn,
                  uint32_t* pd_id);

}  // namespace softrdma::transport
