// A queue pair: the verbs-visible attributes, its send and receive queues,
// and the per-QP state of the three transport roles (rxe's split):
//  - requester: turns posted send WQEs into request records (transport/requester.cpp)
//  - completer: retires send WQEs when ACKs/NAKs arrive (transport/completer.cpp)
//  - responder: executes incoming requests against receive WQEs and
//    answers with ACK/NAK (transport/responder.cpp)
// All of it is protected by `lock`. Lock order: Qp::lock before Cq's lock.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <memory>
#include <type_traits>
#include <vector>

#include <infiniband/verbs.h>

#include "core/ah.h"
#include "core/cq.h"
#include "core/device.h"
#include "core/objects.h"
#include "host/registry.h"
#include "transport/datagram_grh.h"
#include "transport/responder_resources.h"
#include "transport/responder_stall.h"
#include "util/spinlock.h"

namespace softrdma {

struct PeerLink;
class Srq;
struct WrBatch;
struct Xrcd;
void DestroyWrBatch(WrBatch* batch);
namespace transport::roce {
struct RoceQp;
}
// Out of line (transport/roce/roce_wire.cpp): the QP's RoCE state.
void DestroyRoceQp(transport::roce::RoceQp* rq);

struct SendWqe {
  uint64_t wr_id;
  ibv_wr_opcode opcode;
  uint32_t imm;  // network byte order, as posted
  uint32_t psn;
  uint32_t total_len;
  uint32_t num_sge;
  uint32_t tx_offset;  // fragments already pushed (fragment mode)
  bool signaled;
  bool solicited;
  bool is_inline;     // payload copied into the QP's inline buffer at post time
  UdAddress ud;       // UD only: the destination, copied from the WR and its AH
  uint32_t xrc_srqn;  // XRC_SEND only: the SRQ the message must land in
  // --- one-sided operations (transport/one_sided.cpp)
  bool fenced;         // IBV_SEND_FENCE: waits for earlier READs/atomics
  bool has_psn;        // a PSN was assigned (at first transmission on the ring)
  bool placed;         // WRITE_WITH_IMM: data written directly; only the notice is left
  bool resp_done;      // READ/atomic: the whole response arrived (two-copy path)
  uint32_t rx_offset;  // READ: response bytes received (two-copy path)
  uint32_t rkey;
  uint64_t remote_addr;
  uint64_t compare_add;  // CMP_AND_SWP: compare; FETCH_AND_ADD: addend
  uint64_t swap;
  // --- memory windows and invalidation (transport/invalidate.cpp)
  ibv_mw* mw;             // BIND_MW: the window
  ibv_mw_bind_info bind;  // BIND_MW: MR, range and access
  uint32_t key;           // BIND_MW: the new rkey; LOCAL_INV/SEND_WITH_INV: the key to invalidate
};

// An answer of the shm wire's responder (a two-copy READ/atomic response, or
// an ACK/NAK behind one) waiting for room in its requester's ring, kept in
// request order (transport/responder.cpp, SendNak).
struct PendingResponse {
  enum Kind : uint8_t {
    kRead = 1,       // a READ response, read from the MR as it goes out
    kAtomic = 2,     // an atomic's original value
    kAckRecord = 3,  // an ACK or NAK (`syndrome`; `value`: the RNR timer)
  };
  uint8_t kind;
  uint8_t syndrome;
  uint32_t psn;
  uint32_t rkey;
  uint64_t addr;  // READ: where in the region (key address space)
  uint32_t len;
  uint32_t sent;   // READ: bytes already sent
  uint64_t value;  // atomic: the original value
  uint32_t pd_id;  // READ: the PD the rkey belongs to (an XRC target's: its SRQ's)
};

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
};

// A fixed-capacity FIFO of WQEs with their scatter/gather lists stored in a
// side array (max_sge entries per WQE). Indices are free-running counters.
// The storage is rounded up to a power of two so that an index maps to its
// slot with a mask (no division on the post path); `capacity()` stays the
// depth the application asked for, and `full()` holds it to that.
// The arrays are not zeroed: every field a reader uses is written when the
// WQE is posted, and untouched pages cost neither time nor memory (creating a
// QP with deep queues would otherwise fault in all of them).
template <typename Wqe>
struct WorkQueue {
  static_assert(std::is_trivially_default_constructible_v<Wqe>);
  std::unique_ptr<Wqe[]> wqes;
  std::unique_ptr<ibv_sge[]> sges;
  uint32_t max_sge = 0;
  uint32_t depth = 0;  // WQEs the application may have outstanding
  uint32_t mask = 0;   // slots - 1
  uint32_t head = 0;   // next free (producer)
  uint32_t tail = 0;   // oldest live (consumer)

  void Init(uint32_t wqe_depth, uint32_t sge_per_wqe) {
    depth = wqe_depth;
    const uint32_t slot_count = std::bit_ceil(std::max(wqe_depth, 1u));
    mask = slot_count - 1;
    wqes.reset(new Wqe[slot_count]);  // default-initialized: not written
    max_sge = sge_per_wqe ? sge_per_wqe : 1;
    sges.reset(new ibv_sge[static_cast<size_t>(slot_count) * max_sge]);
  }
  uint32_t capacity() const { return depth; }
  uint32_t slots() const { return mask + 1; }
  uint32_t slot(uint32_t index) const { return index & mask; }
  uint32_t size() const { return head - tail; }
  bool full() const { return size() >= depth; }
  Wqe& at(uint32_t index) { return wqes[index & mask]; }
  ibv_sge* sge_of(uint32_t index) { return &sges[static_cast<size_t>(index & mask) * max_sge]; }
};

class Qp {
 public:
  ibv_qp_ex qpx;  // first: ibv_qp is qpx.qp_base, and ibv_qp_to_qp_ex is a cast

  ibv_qp* verbs() { return &qpx.qp_base; }
  static Qp* From(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }

  Context* ctx = nullptr;
  AsyncEventCount async_events;  // its async events (core/async_events.h)
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  ibv_qp_type type = IBV_QPT_RC;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  uint32_t live_index = 0;  // position in the engine's list of QPs (its map lock)

  // The ibv_wr_* batch state (core/verbs_qp_ex.cpp); set only for QPs
  // created through ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.
  std::unique_ptr<WrBatch, void (*)(WrBatch*)> wr_batch{nullptr, DestroyWrBatch};

  SpinLock lock;
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_attr attr{};  // everything set by modify_qp, for query_qp

  // --- requester / completer
  WorkQueue<SendWqe> sq;
  uint32_t sq_tx = 0;                     // next WQE to transmit (tail <= sq_tx <= head)
  std::unique_ptr<uint8_t[]> inline_buf;  // cap.max_inline_data bytes per SQ slot (not zeroed)
  uint32_t next_psn = 0;
  uint64_t rnr_wait_until_ns = 0;
  int rnr_retries_left = 0;
  int retries_left = 0;
  uint64_t last_ack_ns = 0;  // last time the responder showed progress
  // The responder showed progress, or the oldest WQE started out, since the
  // timer last looked: CheckTimers then restarts the clock (last_ack_ns =
  // its now), so the data path never reads the clock.
  bool progress_seen = false;
  bool tx_blocked = false;  // the peer's ring was full
  // The responder's process answered the oldest WQE with "no such QP"
  // (kNakNoQp): it fails when the retransmit timer expires, without retries
  // (transport/completer.cpp, OnAck).
  bool peer_qp_gone = false;
  // The responder's ring as the retransmit timer last found it, records
  // waiting unread (transport/completer.cpp, ResponderNotScheduled): its
  // consumer position then (mark), and since when it has not moved.
  transport::ResponderStallClock peer_stall;
  // SQD (transport/sq_drain.h): the WQEs started before the QP entered it,
  // [sq.tail, sq_drain_end), finish; the others wait for RTS. sq_draining:
  // some are not complete yet; sq_drain_notify: IBV_EVENT_SQ_DRAINED then
  // (en_sqd_async_notify of the modify to SQD).
  uint32_t sq_drain_end = 0;
  bool sq_draining = false;
  bool sq_drain_notify = false;
  std::shared_ptr<PeerLink> peer;  // the remote QP's process, resolved at RTR
  ProcRef peer_ref{};

  // --- responder
  WorkQueue<RecvWqe> rq;
  uint32_t epsn = 0;         // next expected request PSN
  bool frag_active = false;  // a fragmented message is being received
  uint32_t frag_received = 0;
  bool ack_pending = false;  // a (cumulative) ACK for epsn-1 must be sent
  bool in_service_list = false;
  std::deque<PendingResponse> responses;  // answers waiting for room, in request order
  // READ/atomics executed, to answer their duplicates (both wires; reset at RTR).
  transport::ResponderResources rd_resources;

  // --- shared receive queue (core/srq.h); null if the QP has its own RQ.
  // A WQE taken from the SRQ belongs to this QP until its message completes.
  Srq* srq = nullptr;
  RecvWqe srq_wqe{};
  std::vector<ibv_sge> srq_sges;
  bool srq_wqe_held = false;
  bool last_wqe_reached = false;  // IBV_EVENT_QP_LAST_WQE_REACHED raised
  bool comm_established = false;  // IBV_EVENT_COMM_EST raised (a request met the QP in RTR)
  // A completion of this QP was lost to a full CQ (core/cq.cpp): the QP
  // enters ERR with IBV_EVENT_QP_FATAL at its next service (set by whichever
  // thread pushed the completion).
  std::atomic<bool> cq_overrun{false};
  // --- XRC target (transport/xrc.cpp): no PD, no CQs; `srq` is bound per
  // message to the SRQ the sender names, and recv_cq to that SRQ's CQ.
  Xrcd* xrcd = nullptr;
  int xrc_handles = 1;  // creator + ibv_open_qp handles; destroyed at the last
  // The message with PSN xrc_fwd_psn was handed to the process of the SRQ
  // it names (transport/xrc_forward.cpp); its outcome is awaited, and
  // xrc_fwd_dropped says that later requests were dropped meanwhile.
  bool xrc_fwd_pending = false;
  bool xrc_fwd_dropped = false;
  uint32_t xrc_fwd_psn = 0;
  // An ibv_open_qp handle of a target QP of another process (verbs_xrc.cpp):
  // nothing of the QP is here; it can be queried and destroyed.
  bool xrc_foreign = false;
  ProcRef xrc_owner{};
  // --- the RoCE wire (transport/roce/roce_qp.h): set when the peer is
  // reached over UDP; `peer` is then null.
  std::unique_ptr<transport::roce::RoceQp, void (*)(transport::roce::RoceQp*)> roce{nullptr,
                                                                                    DestroyRoceQp};
  // --- UD: the last destination's process (transport/datagram.cpp)
  std::shared_ptr<PeerLink> ud_peer;
  uint32_t ud_peer_qpn = 0;
  GidLookupCache ud_gids;  // the datagrams' source GIDs and whether a destination is local
  transport::DatagramGrhCache ud_grh;  // the last route's GRH area (transport/datagram_grh.h)
  // --- UD multicast (core/verbs_mcast.cpp): groups attached (ibv_destroy_qp
  // refuses while any is), and IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.
  uint32_t mcast_attachments = 0;
  bool block_self_mcast_loopback = false;
  // --- UD created with IBV_QP_CREATE_SOURCE_QPN = 1: this process's GSI
  // agent (the CM's QP1 sender): it sends as QP1 and, from RTR, reads the
  // RoCE wire, where other hosts' MADs for this host's QP1 arrive.
  bool gsi_agent = false;

  uint8_t* inline_slot(uint32_t index) {
    return inline_buf.get() + static_cast<size_t>(sq.slot(index)) * cap.max_inline_data;
  }
};
static_assert(offsetof(Qp, qpx) == 0);

// 24-bit PSN arithmetic (PSNs wrap; "a before b" within half the space).
inline uint32_t PsnAdd(uint32_t psn, uint32_t n) {
  return (psn + n) & 0xffffff;
}
inline bool PsnBefore(uint32_t a, uint32_t b) {
  uint32_t d = (b - a) & 0xffffff;
  return d != 0 && d < 0x800000;
}

}  // namespace softrdma
