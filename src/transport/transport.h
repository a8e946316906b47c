// The transport roles of a QP (requester, completer, responder) as free
// functions over Qp. Every function here expects the caller to hold qp.lock.
#pragma once

#include <cstdint>
#include <span>

#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "core/qp.h"
#include "transport/messages.h"
#include "wire/shm/ring.h"

namespace softrdma {
class Engine;
struct PeerLink;
}  // namespace softrdma

namespace softrdma::transport {

// --- requester (requester.cpp)
// The rules PostSend applies to one WR (opcode, SGE count, lengths); 0 or
// the errno PostSend would return. *total = the message length. Used by the
// work-request API (core/verbs_qp_ex.cpp) to check a whole batch before
// posting any of it.
int ValidateSendWr(const Qp& qp, const ibv_send_wr& wr, uint64_t* total);
// Validates and queues a chain of send WRs, then starts transmitting.
int PostSend(Engine& engine, Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
// The same, taking qp.lock itself (the one exception to the rule above):
// ibv_post_send's entry then only checks its arguments and jumps here,
// instead of keeping a frame of its own around the call for the unlock.
int LockAndPostSend(Engine& engine, Qp& qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
// Transmits queued WQEs until the queue is empty, the peer's ring is full or
// an RNR wait is pending.
void Transmit(Engine& engine, Qp& qp);
// At RTR: the wire to the QP's peer. RC/UC over RoCE (qp.roce) when the
// destination GID is not this host's or SOFTRDMA_WIRE=roce; else over shared
// memory (qp.peer, resolved now or lazily by EnsurePeer).
void ChooseWire(Engine& engine, Qp& qp);
// Whether the QP's peer is a process of this host's registry (our GID and
// our registry's QPN range): one whose CPU we can see, whatever wire it uses.
bool PeerSharesOurRegistry(Engine& engine, const Qp& qp);
// Maps the connected peer's process if not done yet (lazily, as the
// remote QP may be created after our RTR). false = no live owner.
bool EnsurePeer(Engine& engine, Qp& qp);
// Deferred work: blocked transmissions, RNR waits, blocked ACKs. Returns
// true if progress was made; *deadline = when it wants to run again (0 = never).
bool Service(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline);

// Resolves a send WQE's SGEs to iovecs of this process (lkey, bounds, PD).
// Returns the count or -1.
// `extents` (optional) receives each iovec's exported extent slot (0 = none).
int ResolveLocal(Engine& engine, Qp& qp, uint32_t index, const SendWqe& w, iovec* out,
                 uint32_t* extents = nullptr);

// --- datagram (datagram.cpp): UD sends and receives
void TransmitDatagrams(Engine& engine, Qp& qp);
// UC/UD: completes every WQE handed to the wire (no acknowledgement comes).
void CompleteUnacknowledged(Qp& qp);
void OnDatagram(Engine& engine, Qp& qp, const wire::RecordHeader& hdr, const shm::RecordView& view);
// A UD datagram from the RoCE wire (transport/roce), after its checks: the
// same Q_Key rule, receive WQE choice, GRH area and completion.
struct RoceDatagramIn {
  uint32_t src_qpn;  // DETH
  uint32_t qkey;     // DETH
  ibv_gid sgid;      // the sender's address
  ibv_gid dgid;      // the address it was sent to
  bool solicited;
  bool has_imm;
  uint32_t imm_be;  // as ibv_wc.imm_data
  std::span<const uint8_t> payload;
};
void OnRoceDatagram(Engine& engine, Qp& qp, const RoceDatagramIn& in);

// --- completer (completer.cpp)
void OnAck(Engine& engine, Qp& qp, const wire::RecordHeader& ack);
// Retransmit timer. Returns true while the QP has sends outstanding. With
// `ring_look_wanted` (shm QPs only), an expiry that finds records unread in
// this process's own inbound ring is not counted: *ring_look_wanted is set
// and the timer looks again a moment later, so that the caller can take
// those records (an ACK of ours may be among them) and check again.
bool CheckTimers(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline,
                 bool* ring_look_wanted = nullptr);
// How soon a timer whose expiry waited for a look at our own ring looks
// again when that ring could not be taken (its consumer lock was held).
inline constexpr uint64_t kRingLookRetryNs = 1'000'000;
// Completes the SQ head with `status` (always reported) and moves the QP to ERR.
void FailSendHead(Engine& engine, Qp& qp, ibv_wc_status status);
void CompleteSend(Qp& qp, const SendWqe& wqe, ibv_wc_status status);
// The same for a WR that never became a WQE (ExecuteAtPost).
void CompleteSendWr(Qp& qp, uint64_t wr_id, ibv_wr_opcode opcode, uint32_t byte_len,
                    ibv_wc_status status);

// --- responder (responder.cpp)
// ibv_post_recv on `qp`: takes the QP's lock, validates and queues the WRs.
int LockAndPostRecv(Engine& engine, Qp& qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
// Executes an incoming request. Returns true if an ACK must be sent.
bool OnRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req, const shm::RecordView& view);
// Sends the cumulative ACK for epsn-1. false = the requester's ring is full.
bool SendAck(Engine& engine, Qp& qp);
// Puts the QP's pending ACK into a request header going to its peer
// (kFlagAck); true if it did. The caller clears qp.ack_pending once the
// record is on the ring.
bool PiggybackAck(const Qp& qp, wire::RecordHeader* h);
// The ACK carried by a request record (kFlagAck), handled as a kAck record.
void OnPiggybackedAck(Engine& engine, Qp& qp, const wire::RecordHeader& req);
// Answers `req` (a request for `qp`) with a NAK, in request order: after
// the ACK owed and the READ/atomic answers still queued (responder.cpp).
void SendNak(Engine& engine, Qp& qp, const wire::RecordHeader& req, wire::Syndrome why,
             uint32_t rnr_timer = 0);
// The NAK for a request addressed to no QP of this process.
void SendNakNoQp(Engine& engine, PeerLink& peer, const wire::RecordHeader& req);
// Copies `len` bytes at `src_off` of the ring record into the iovecs at
// byte offset `dst_off`.
void ScatterFromRecord(const shm::RecordView& view, uint32_t src_off, const iovec* iov, int n,
                       uint64_t dst_off, uint64_t len);
enum class PullResult { kOk, kRefused, kFault };
// Reads a kPull request's message (its iovec list at `list_off` of the
// record) into our receive buffers: by memcpy where the requester's
// registered memory is mapped here, else with cross-memory attach.
PullResult PullFromRequester(PeerLink& peer, const iovec* local, int nlocal,
                             const shm::RecordView& view, uint32_t list_off,
                             const wire::RecordHeader& req);

// --- one-sided operations (one_sided.cpp): RDMA WRITE/READ and atomics
inline bool IsOneSided(ibv_wr_opcode op) {  // inline: asked for every WQE transmitted
  return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ ||
         op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
// Post-time checks beyond the common ones (atomic size/alignment, inline).
int ValidateOneSidedWr(const Qp& qp, const ibv_send_wr& wr, uint64_t total);
// Fills the WQE's one-sided fields (remote address, keys, fence, ...).
void CaptureOneSidedWr(SendWqe& w, const ibv_send_wr& wr);
// True while an IBV_SEND_FENCE WQE must wait (earlier READ/atomic outstanding).
bool FenceBlocks(Qp& qp);
enum class OneSidedTx {
  kSent,     // request record(s) on the peer's ring: advance sq_tx
  kBlocked,  // the peer's ring is full: retry later
  kFailed,   // bad local SGE (handled like the SEND path)
  kRetired,  // executed directly and retired (sq.tail and sq_tx advanced)
  kWait,     // must wait until the earlier WQEs complete
  kStopped,  // completed with an error: the QP is in ERR
};
OneSidedTx TransmitOneSided(Engine& engine, Qp& qp, uint32_t index);
// Post time: executes a validated one-sided WR for which MayExecuteAtPost
// holds at once, without queueing it, where TransmitOneSided would execute
// it directly as the head of the SQ; completes it if signaled. false = not
// done: queue it as usual (which also reports any error).
bool ExecuteAtPost(Engine& engine, Qp& qp, const ibv_send_wr& wr, uint32_t total_len);
// The cheap part of ExecuteAtPost's conditions, inline so that a SEND does
// not pay a call for it: the opcode (not WRITE_WITH_IMM, which needs a
// record), and an idle send queue.
inline bool MayExecuteAtPost(const Qp& qp, ibv_wr_opcode op) {
  return (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
          op == IBV_WR_ATOMIC_FETCH_AND_ADD) &&
         qp.sq.head == qp.sq.tail;
}
// Responder side of kWrite/kRead/kAtomic/kRemoteError records. Returns true
// if an ACK must be sent.
bool OnOneSidedRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                       const shm::RecordView& view);
// Sends the queued answers (READ/atomic responses, ACKs/NAKs behind them)
// in order. false = the ring is full.
bool FlushResponses(Engine& engine, Qp& qp);
// Requester side of kReadResponse/kAtomicResponse records.
void OnOneSidedResponse(Engine& engine, Qp& qp, const wire::RecordHeader& resp,
                        const shm::RecordView& view);
// Publishes the QP's PD, access flags, state and peer for initiators.
void PublishQp(Engine& engine, Qp& qp, bool destroyed = false);
// Completer: retires WQEs acknowledged up to `psn`; a READ/atomic only once
// its response arrived.
void RetireAcked(Qp& qp, uint32_t psn, bool inclusive);

// --- memory windows and invalidation (invalidate.cpp)
// BIND_MW and LOCAL_INV: executed by the requester, no packet.
inline bool IsLocalOp(ibv_wr_opcode op) {
  return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}
// Fills the WQE's window/invalidation fields from the WR.
void CaptureLocalOpWr(SendWqe& w, const ibv_send_wr& wr);
// Executes a local operation once it is the head of the SQ (kWait before
// that; kRetired or kStopped after).
OneSidedTx ExecuteLocalOp(Engine& engine, Qp& qp, uint32_t index);
// Responder of a SEND with Invalidate: invalidates `rkey` for this QP.
bool InvalidateForSend(Engine& engine, Qp& qp, uint32_t rkey);

// --- state changes (qp_errors.cpp)
// Moves the QP to ERR and flushes every outstanding WQE with IBV_WC_WR_FLUSH_ERR.
void EnterError(Engine& engine, Qp& qp);
// Completes every send WQE not yet completed with IBV_WC_WR_FLUSH_ERR.
void FlushSendQueue(Qp& qp);
// UC/UD send error: the QP goes to SQE and its send queue is flushed.
void EnterSendQueueError(Qp& qp);
// Discards every WQE without completions (transition to RESET).
void ResetQueues(Qp& qp);

// RNR NAK timer code -> nanoseconds (docs/rc-transport.md §5.3).
uint64_t RnrTimerNs(uint32_t code);
// Local ACK timeout: 4.096 us * 2^timeout; 0 = infinite (returns 0).
uint64_t AckTimeoutNs(uint8_t timeout);

}  // namespace softrdma::transport
