// One-sided operations: RDMA WRITE (with immediate), RDMA READ and atomics.
//
// One copy, no target CPU: where cross-memory attach works, the initiator
// executes the operation itself against the target's published MR table
// (rkey, bounds, access, PD) and the target QP's published attributes (PD,
// remote access flags, state, connected QPN), moving the bytes with one
// process_vm_writev/readv. Such a WQE runs only at the head of the send
// queue (every earlier WQE is complete), so it completes at once and in
// order; the target's ring is not involved (WRITE_WITH_IMM adds a record
// that consumes the target's receive WQE).
//
// Two copies: where cross-memory attach is refused (or SOFTRDMA_CMA=0) the
// same operations travel as request records (kWrite/kRead/kAtomic) with
// PSNs, executed by the target's progress and answered by ACKs or by
// response records (kReadResponse/kAtomicResponse) that the target queues in
// order in Qp::responses until the initiator's ring has room (with the ACKs
// and NAKs behind them: transport/responder.cpp, SendNak). A duplicate
// request (the requester's retransmit timer rewound) is answered with the
// RoCE responder's rule (transport/responder_resources.h): a duplicate
// WRITE is acknowledged again, a duplicate READ read again from the MR, a
// duplicate atomic's saved result sent again, never executed twice.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/uio.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/srq.h"
#include "core/xrcd.h"
#include "transport/atomics.h"
#include "transport/engine.h"
#include "transport/iov_slice.h"
#include "transport/recv_source.h"
#include "transport/transport.h"
#include "transport/xrc.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/log.h"
#include "util/process.h"

namespace softrdma::transport {

namespace {

constexpr uint32_t kResponseChunk = 8192;  // READ response fragments (two-copy path)

bool IsAtomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

uint32_t NeededAccess(ibv_wr_opcode op) {
  if (op == IBV_WR_RDMA_READ) return IBV_ACCESS_REMOTE_READ;
  if (IsAtomic(op)) return IBV_ACCESS_REMOTE_ATOMIC;
  return IBV_ACCESS_REMOTE_WRITE;
}

bool StateAcceptsRequests(uint32_t s) {
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// A one-sided operation as direct execution needs it: taken from a queued
// WQE, or straight from the WR at post time (ExecuteAtPost).
struct DirectOp {
  ibv_wr_opcode opcode;
  uint32_t total_len;
  uint32_t rkey;
  uint64_t remote_addr;
  uint64_t compare_add;
  uint64_t swap;
  // The local buffers: the WQE's inline copy, or SGEs. `sges_are_inline`:
  // the WR's own IBV_SEND_INLINE buffers at post time, used without an lkey.
  const uint8_t* inline_copy;
  const ibv_sge* sge;
  uint32_t num_sge;
  bool sges_are_inline;
  uint32_t xrc_srqn;  // XRC initiator: the target SRQ, whose PD the rkey belongs to
};

DirectOp DirectOpOf(Qp& qp, uint32_t index) {
  const SendWqe& w = qp.sq.at(index);
  return DirectOp{w.opcode,
                  w.total_len,
                  w.rkey,
                  w.remote_addr,
                  w.compare_add,
                  w.swap,
                  w.is_inline ? qp.inline_slot(index) : nullptr,
                  qp.sq.sge_of(index),
                  w.num_sge,
                  false,
                  w.xrc_srqn};
}

// The operation's local buffers as iovecs; READ/atomic results need LOCAL_WRITE.
[[gnu::always_inline]] inline int ResolveLocalSges(Engine& engine, const Qp& qp, const DirectOp& op,
                                                   uint32_t access, iovec* out) {
  if (op.inline_copy) {
    out[0] = iovec{const_cast<uint8_t*>(op.inline_copy), op.total_len};
    return op.total_len ? 1 : 0;
  }
  if (!op.sges_are_inline)
    return engine.mr_table().ResolveSges(op.sge, op.num_sge, qp.pd->id, access, out);
  int n = 0;  // IBV_SEND_INLINE buffers: no lkey to check
  for (uint32_t i = 0; i < op.num_sge; ++i)
    if (op.sge[i].length)
      out[n++] = iovec{reinterpret_cast<void*>(op.sge[i].addr), op.sge[i].length};
  return n;
}

void AssignPsn(Qp& qp, SendWqe& w) {
  if (w.has_psn) return;
  w.psn = qp.next_psn;
  qp.next_psn = PsnAdd(qp.next_psn, 1);
  w.has_psn = true;
}

wire::RecordHeader BaseHeader(Engine& engine, const Qp& qp, wire::RecordType type) {
  wire::RecordHeader h{};
  h.type = type;
  h.src_qpn = qp.qpx.qp_base.qp_num;
  h.dst_qpn = qp.attr.dest_qp_num;
  h.src_slot = engine.me().slot;
  h.src_gen = engine.me().gen;
  return h;
}

// Tells the target QP that we found an access violation, so that it moves
// to ERR as a responder sending an access NAK would. Best effort: a full
// ring loses it (the target then learns of it no other way).
void NotifyRemoteError(Engine& engine, Qp& qp) {
  wire::RecordHeader h = BaseHeader(engine, qp, wire::RecordType::kRemoteError);
  engine.Send(*qp.peer, h, nullptr, 0);
}

enum class Direct { kDone, kUseRing, kFailed };

// May one-sided operations to `peer` use process_vm_readv/writev?
bool CrossMemoryAttach(const PeerLink& peer) {
  return GetConfig().cma_allowed && !peer.direct_refused.load(std::memory_order_relaxed);
}

// Copies between our iovecs and [addr, addr+len) of the peer: a memcpy where
// its memory is mapped here (or ours), else cross-memory attach; ENOSYS when
// neither is possible.
int MoveBytes(PeerLink& peer, uint8_t* mapped, const iovec* local, int nlocal, uint64_t addr,
              uint64_t len, bool write) {
  if (!mapped && !CrossMemoryAttach(peer)) return ENOSYS;
  if (!mapped && peer.pid == SelfPid()) mapped = reinterpret_cast<uint8_t*>(addr);
  if (mapped) {
    uint8_t* p = mapped;
    for (int i = 0; i < nlocal; ++i) {
      // memmove: a WRITE/READ between QPs of one process may overlap itself.
      if (write)
        memmove(p, local[i].iov_base, local[i].iov_len);
      else
        memmove(local[i].iov_base, p, local[i].iov_len);
      p += local[i].iov_len;
    }
    return 0;
  }
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t n = write ? process_vm_writev(peer.pid, local, nlocal, &remote, 1, 0)
                    : process_vm_readv(peer.pid, local, nlocal, &remote, 1, 0);
  if (n == static_cast<ssize_t>(len)) return 0;
  return n < 0 ? errno : EFAULT;
}

// Executes the operation against the peer's memory (the head of the SQ, or
// a WR posted to an idle SQ).
[[gnu::always_inline]] inline Direct ExecuteDirect(Engine& engine, Qp& qp, const DirectOp& w,
                                                   ibv_wc_status* status) {
  PeerLink& peer = *qp.peer;
  // The target process has exited: its memory (still mapped here, or
  // reachable until its pid is reused) must not take data any more; a NIC
  // would get no answer from that node and give up after its retries.
  if (peer.gone.load(std::memory_order_relaxed)) {
    *status = IBV_WC_RETRY_EXC_ERR;
    return Direct::kFailed;
  }
  const PublishedQp* pub = engine.registry().published_qp(qp.attr.dest_qp_num);
  if (!pub) return Direct::kUseRing;
  QpSnapshot t = ReadQpEntry(*pub);
  // Anything unusual (the target QP not ready, connected elsewhere, owned by
  // another process) takes the ring path, whose rules cover it.
  if (t.owner_slot != peer.ref.slot || t.owner_gen != peer.ref.gen ||
      !StateAcceptsRequests(t.state) || t.dest_qpn != qp.qpx.qp_base.qp_num)
    return Direct::kUseRing;
  // Through an XRC target the rkey belongs to the PD of the SRQ the WR names
  // (transport/xrc.h); an SRQ we cannot use here is left to the responder.
  uint32_t pd_id = t.pd_id;
  if (qp.type == IBV_QPT_XRC_SEND && !XrcRequestPd(engine.registry(), t, w.xrc_srqn, &pd_id))
    return Direct::kUseRing;

  const uint32_t need = NeededAccess(w.opcode);
  const uint64_t len = w.total_len;
  const bool to_peer = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  iovec local[limits::kMaxSge];
  int nlocal = ResolveLocalSges(engine, qp, w, to_peer ? 0 : IBV_ACCESS_LOCAL_WRITE, local);
  if (nlocal < 0) {
    *status = IBV_WC_LOC_PROT_ERR;
    return Direct::kFailed;
  }
  if (!(t.access & need)) {
    *status = IBV_WC_REM_ACCESS_ERR;
    return Direct::kFailed;
  }
  // The target's max_dest_rd_atomic is 0: a responder NAKs READ/atomic as
  // an invalid request (rc-transport.md §4.1 rule 4).
  if (need != IBV_ACCESS_REMOTE_WRITE && (t.access & kPublishedNoReadResources)) {
    *status = IBV_WC_REM_INV_REQ_ERR;
    return Direct::kFailed;
  }
  if (len == 0 && !IsAtomic(w.opcode)) return Direct::kDone;  // no rkey check (spec)

  uint64_t host = 0;
  const MrEntry* held = nullptr;
  uint32_t extent = 0;
  if (MrTable::BeginRemoteAccess(peer.mrs, w.rkey, w.remote_addr, len, pd_id, need,
                                 qp.attr.dest_qp_num, &host, &held, &extent) != 0) {
    *status = IBV_WC_REM_ACCESS_ERR;
    return Direct::kFailed;
  }
  uint8_t* mapped = peer.mappings ? peer.mappings->Resolve(extent, host, len) : nullptr;
  int err = 0;
  if (IsAtomic(w.opcode)) {
    AtomicLocks locks(engine.registry().atomic_lock_words());
    AtomicOp op{w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP, w.compare_add, w.swap};
    uint64_t original = 0;
    if (mapped) {
      ExecuteAtomicMapped(locks, peer.ref.slot, host, mapped, op, &original);
    } else if (!CrossMemoryAttach(peer)) {
      err = ENOSYS;
    } else {
      AtomicResult r = ExecuteAtomic(locks, peer.pid, peer.ref.slot, host, op, &original);
      err = r == AtomicResult::kOk        ? 0
            : r == AtomicResult::kRefused ? EPERM
            : r == AtomicResult::kGone    ? ESRCH
                                          : EFAULT;
    }
    if (!err) memcpy(local[0].iov_base, &original, 8);  // validated: one 8-byte SGE
  } else {
    err = MoveBytes(peer, mapped, local, nlocal, host, len, to_peer);
  }
  MrTable::EndRemoteAccess(*held);
  if (err == ENOSYS) return Direct::kUseRing;  // neither mapped nor attachable
  if (err == EPERM || err == EACCES) {
    SOFTRDMA_LOG(kInfo,
                 "cross-memory attach to pid %d refused (%s): one-sided operations use "
                 "the two-copy path",
                 peer.pid, strerror(err));
    peer.direct_refused.store(true, std::memory_order_relaxed);
    return Direct::kUseRing;
  }
  if (err == ESRCH) {
    *status = IBV_WC_RETRY_EXC_ERR;  // the target process is gone
    return Direct::kFailed;
  }
  if (err) {
    // The region is registered but its pages are not mapped (any more).
    *status = IBV_WC_REM_ACCESS_ERR;
    return Direct::kFailed;
  }
  return Direct::kDone;
}

// Sends the WQE as request records (two-copy path, or the notification of
// a directly placed WRITE_WITH_IMM).
OneSidedTx SendRequest(Engine& engine, Qp& qp, uint32_t index, bool placed) {
  SendWqe& w = qp.sq.at(index);
  AssignPsn(qp, w);
  wire::RecordType type = w.opcode == IBV_WR_RDMA_READ ? wire::RecordType::kRead
                          : IsAtomic(w.opcode)         ? wire::RecordType::kAtomic
                                                       : wire::RecordType::kWrite;
  wire::RecordHeader h = BaseHeader(engine, qp, type);
  h.psn = w.psn;
  h.rnr_timer = w.xrc_srqn;  // XRC: the target SRQ (XRCETH), as for a SEND
  h.total_len = w.total_len;
  h.imm = w.imm;
  h.flags = static_cast<uint8_t>((w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? wire::kFlagHasImm : 0) |
                                 (w.solicited ? wire::kFlagSolicited : 0) |
                                 (placed ? wire::kFlagPlaced : 0) |
                                 (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? wire::kFlagCmpSwap : 0));
  wire::OneSidedEth eth{w.remote_addr, w.rkey, 0, w.compare_add, w.swap};
  iovec parts[limits::kMaxSge + 2];
  parts[0] = iovec{&h, sizeof h};
  parts[1] = iovec{&eth, sizeof eth};
  if (type != wire::RecordType::kWrite || placed || w.total_len == 0) {
    h.mode = wire::PayloadMode::kInline;
    return engine.SendGather(*qp.peer, h, parts, 2) ? OneSidedTx::kSent : OneSidedTx::kBlocked;
  }
  iovec local[limits::kMaxSge];
  int nlocal = ResolveLocalSges(engine, qp, DirectOpOf(qp, index), 0, local);
  if (nlocal < 0) return OneSidedTx::kFailed;
  // WRITE data: in one record when small, else in fragments, resuming where
  // a full ring stopped us.
  const uint32_t piece = std::max<uint32_t>(GetConfig().shm_inline_max, 1);
  h.mode = w.total_len <= piece ? wire::PayloadMode::kInline : wire::PayloadMode::kFragment;
  while (w.tx_offset < w.total_len) {
    uint32_t len = std::min(std::max(piece, 8192u), w.total_len - w.tx_offset);
    int n = 2 + SliceIovecs(local, nlocal, w.tx_offset, len, parts + 2);
    h.frag_offset = w.tx_offset;
    h.payload_len = len;
    h.flags =
        static_cast<uint8_t>((h.flags & ~wire::kFlagLastFragment) |
                             (w.tx_offset + len == w.total_len ? wire::kFlagLastFragment : 0));
    if (!engine.SendGather(*qp.peer, h, parts, n)) return OneSidedTx::kBlocked;
    w.tx_offset += len;
  }
  return OneSidedTx::kSent;
}

}  // namespace

int ValidateOneSidedWr(const Qp& qp, const ibv_send_wr& wr, uint64_t total) {
  (void)qp;
  if (wr.opcode == IBV_WR_RDMA_READ || IsAtomic(wr.opcode)) {
    if (wr.send_flags & IBV_SEND_INLINE) return EINVAL;  // results land in local memory
  }
  if (IsAtomic(wr.opcode)) {
    // 8 bytes, naturally aligned (rc-transport.md §3.1: refused at post time).
    if (total != 8 || wr.num_sge != 1 || (wr.wr.atomic.remote_addr & 7)) return EINVAL;
  }
  return 0;
}

void CaptureOneSidedWr(SendWqe& w, const ibv_send_wr& wr) {
  w.has_psn = false;
  w.placed = false;
  w.resp_done = false;
  w.rx_offset = 0;
  w.fenced = wr.send_flags & IBV_SEND_FENCE;
  w.rkey = 0;
  w.remote_addr = w.compare_add = w.swap = 0;
  if (IsAtomic(wr.opcode)) {
    w.remote_addr = wr.wr.atomic.remote_addr;
    w.rkey = wr.wr.atomic.rkey;
    w.compare_add = wr.wr.atomic.compare_add;
    w.swap = wr.wr.atomic.swap;
  } else if (IsOneSided(wr.opcode)) {
    w.remote_addr = wr.wr.rdma.remote_addr;
    w.rkey = wr.wr.rdma.rkey;
  }
  if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) w.imm = wr.imm_data;
  CaptureLocalOpWr(w, wr);  // windows and invalidation (invalidate.cpp)
}

bool FenceBlocks(Qp& qp) {
  for (uint32_t i = qp.sq.tail; i != qp.sq_tx; ++i) {
    ibv_wr_opcode op = qp.sq.at(i).opcode;
    if (op == IBV_WR_RDMA_READ || IsAtomic(op)) return true;
  }
  return false;
}

OneSidedTx TransmitOneSided(Engine& engine, Qp& qp, uint32_t index) {
  SendWqe& w = qp.sq.at(index);
  // A WRITE_WITH_IMM whose data is placed only resends its notification.
  if (w.placed) return SendRequest(engine, qp, index, true);
  // Direct execution needs the peer's memory mapped here or attachable
  // (SOFTRDMA_CMA=0 sends even our own QPs' operations through the ring). A
  // retransmitted ring request stays on the ring.
  const bool direct_possible = (qp.peer->mappings || CrossMemoryAttach(*qp.peer)) && !w.has_psn;
  if (direct_possible) {
    // Runs only at the head, so that it completes in SQ order at once.
    if (index != qp.sq.tail) return OneSidedTx::kWait;
    ibv_wc_status status = IBV_WC_SUCCESS;
    Direct d = ExecuteDirect(engine, qp, DirectOpOf(qp, index), &status);
    if (d == Direct::kFailed) {
      FailSendHead(engine, qp, status);
      // The target QP enters ERR too, as after sending an access or
      // invalid-request NAK.
      if (status == IBV_WC_REM_ACCESS_ERR || status == IBV_WC_REM_INV_REQ_ERR)
        NotifyRemoteError(engine, qp);
      return OneSidedTx::kStopped;
    }
    if (d == Direct::kDone) {
      // WRITE_WITH_IMM: the data is placed; a record consumes the target's
      // receive WQE (and is retried on RNR: the data stays placed).
      if (w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
        w.placed = true;
        return SendRequest(engine, qp, index, true);
      }
      if (w.signaled) CompleteSend(qp, w, IBV_WC_SUCCESS);
      ++qp.sq.tail;
      ++qp.sq_tx;
      return OneSidedTx::kRetired;
    }
  }
  // Initiator depth (rc-transport.md §3.3): at most max_rd_atomic READ/atomic
  // requests outstanding on the ring; the rest of the queue waits in order.
  if ((w.opcode == IBV_WR_RDMA_READ || IsAtomic(w.opcode)) && !w.has_psn) {
    uint32_t outstanding = 0;
    for (uint32_t i = qp.sq.tail; i != index; ++i) {
      const SendWqe& e = qp.sq.at(i);
      outstanding += (e.opcode == IBV_WR_RDMA_READ || IsAtomic(e.opcode)) && !e.resp_done;
    }
    if (outstanding >= std::max<uint32_t>(qp.attr.max_rd_atomic, 1)) return OneSidedTx::kWait;
  }
  return SendRequest(engine, qp, index, false);
}

bool ExecuteAtPost(Engine& engine, Qp& qp, const ibv_send_wr& wr, uint32_t total_len) {
  // Exactly where the queued WQE would be executed directly at once. The
  // caller checked MayExecuteAtPost (the opcode, and an idle send queue: so
  // nothing earlier is outstanding and a fence has nothing to wait for); the
  // QP must also be an RC QP in RTS whose peer is resolved and reachable
  // without its ring.
  if ((qp.type != IBV_QPT_RC && qp.type != IBV_QPT_XRC_SEND) || qp.state != IBV_QPS_RTS ||
      qp.rnr_wait_until_ns || !qp.peer)
    return false;
  if (!qp.peer->mappings && !CrossMemoryAttach(*qp.peer)) return false;
  const bool atomic = IsAtomic(wr.opcode);
  DirectOp op{wr.opcode,
              total_len,
              atomic ? wr.wr.atomic.rkey : wr.wr.rdma.rkey,
              atomic ? wr.wr.atomic.remote_addr : wr.wr.rdma.remote_addr,
              atomic ? wr.wr.atomic.compare_add : 0,
              atomic ? wr.wr.atomic.swap : 0,
              nullptr,
              wr.sg_list,
              static_cast<uint32_t>(wr.num_sge),
              (wr.send_flags & IBV_SEND_INLINE) != 0,
              qp.type == IBV_QPT_XRC_SEND ? wr.qp_type.xrc.remote_srqn & 0xffffff : 0};
  ibv_wc_status status = IBV_WC_SUCCESS;
  // Anything but success is left to the queued path, which runs the same
  // checks again and reports what it finds (a failure moved no data).
  if (ExecuteDirect(engine, qp, op, &status) != Direct::kDone) return false;
  if (qp.sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED))
    CompleteSendWr(qp, wr.wr_id, wr.opcode, total_len, IBV_WC_SUCCESS);
  return true;
}

// ---------------------------------------------------------------- responder

namespace {

// The responder's hold on one of its own regions while it copies (two-copy
// path): deregistration in another thread waits for it, so the memory is
// not unmapped under the copy.
class RegionHold {
 public:
  RegionHold(Engine& engine, const Qp& qp, uint32_t pd_id, uint32_t rkey, uint64_t addr,
             uint64_t len, uint32_t access) {
    ok_ = MrTable::BeginRemoteAccess(engine.mr_table().entries(), rkey, addr, len, pd_id, access,
                                     qp.qpx.qp_base.qp_num, &host_, &held_) == 0;
  }
  ~RegionHold() {
    if (ok_) MrTable::EndRemoteAccess(*held_);
  }
  RegionHold(const RegionHold&) = delete;
  RegionHold& operator=(const RegionHold&) = delete;
  bool ok() const { return ok_; }
  uint64_t host() const { return host_; }

 private:
  bool ok_ = false;
  uint64_t host_ = 0;
  const MrEntry* held_ = nullptr;
};

// An access NAK moves the responder to ERR too (rc-transport.md §4.6).
bool Violation(Engine& engine, Qp& qp, const wire::RecordHeader& req, wire::Syndrome why) {
  SendNak(engine, qp, req, why);
  EnterError(engine, qp);
  return false;
}

// The receive WQE a WRITE_WITH_IMM consumes: the QP's own, or one of its
// SRQ (an XRC target's: the SRQ the request names).
void CompleteWriteImm(Qp& qp, const RecvSlot& slot, const wire::RecordHeader& req) {
  ibv_wc wc{};
  wc.wr_id = slot.wqe->wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  wc.byte_len = req.total_len;
  wc.qp_num = qp.qpx.qp_base.qp_num;
  wc.src_qp = req.src_qpn;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = req.imm;
  qp.recv_cq->Push(wc, (req.flags & wire::kFlagSolicited) != 0);
  ConsumeRecv(qp);  // after the push: an XRC target's recv_cq goes with its SRQ
}

// An XRC target lets go of the SRQ a request bound once the request is
// handled (unless a WRITE_WITH_IMM in fragments holds one of its WQEs).
struct XrcSrqBinding {
  Qp& qp;
  ~XrcSrqBinding() {
    if (qp.type == IBV_QPT_XRC_RECV) UnbindXrcSrq(qp);
  }
};

// A request whose PSN was executed already (the requester rewound after
// its retransmit timer expired): a WRITE is acknowledged again (true), a
// READ/atomic answered with the rule both wires share; what is not
// remembered is dropped, as on an HCA. Access was checked the first time.
bool OnDuplicateRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                        const wire::OneSidedEth& eth) {
  if (req.type == wire::RecordType::kWrite) return true;
  PendingResponse r{};
  r.psn = req.psn;
  if (req.type == wire::RecordType::kRead) {
    const ExecutedRequest* e =
        qp.rd_resources.ReadToReplay(req.psn, eth.rkey, eth.remote_addr, req.total_len);
    if (!e) return false;
    // Its first answer still queued here (waiting for room in the
    // requester's ring) will arrive whole, as nothing on this wire is lost:
    // reading it all again would only double what waits for that room (a
    // slow requester of 8 MiB READs timed out over and over).
    for (const PendingResponse& q : qp.responses)
      if (q.kind == PendingResponse::kRead && q.psn == req.psn) return false;
    r.kind = PendingResponse::kRead;  // read again now: FlushResponses copies from the MR
    r.rkey = eth.rkey;
    r.addr = eth.remote_addr;
    r.len = req.total_len;
    r.pd_id = e->pd_id;
  } else if (req.type == wire::RecordType::kAtomic) {
    const ExecutedRequest* e = qp.rd_resources.AtomicToReplay(req.psn);
    if (!e) return false;
    r.kind = PendingResponse::kAtomic;
    r.value = e->original;
  } else {
    return false;
  }
  qp.responses.push_back(r);
  if (!FlushResponses(engine, qp)) engine.NeedService(&qp);
  return false;  // the response is the acknowledgement
}

// A WRITE, or one fragment of it: placed into the MR (unless the requester
// placed it itself, kFlagPlaced), and a WRITE_WITH_IMM's receive completed
// with its last fragment. true: acknowledge it.
bool ExecuteWrite(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                  const shm::RecordView& view, const wire::OneSidedEth& eth, uint32_t pd_id) {
  const bool fragment = req.mode == wire::PayloadMode::kFragment;
  if (fragment && req.frag_offset == 0) {
    qp.frag_received = 0;
    qp.frag_active = false;
  }
  if (fragment && (req.frag_offset != qp.frag_received || (req.frag_offset && !qp.frag_active)))
    return false;  // the tail of a message we NAKed
  const bool imm = req.flags & wire::kFlagHasImm;
  RecvSlot slot;
  if (imm && !AcquireRecv(qp, &slot)) {
    SendNak(engine, qp, req, wire::Syndrome::kRnrNak, qp.attr.min_rnr_timer);
    return false;
  }
  if (!(req.flags & wire::kFlagPlaced) && req.total_len > 0) {
    RegionHold hold(engine, qp, pd_id, eth.rkey, eth.remote_addr, req.total_len,
                    IBV_ACCESS_REMOTE_WRITE);
    if (!hold.ok()) return Violation(engine, qp, req, wire::Syndrome::kNakRemoteAccess);
    uint32_t off = fragment ? req.frag_offset : 0;
    if (off + uint64_t{req.payload_len} > req.total_len) return false;  // malformed
    const uint32_t data_off = sizeof req + sizeof eth;
    view.CopyOut(data_off, reinterpret_cast<void*>(hold.host() + off), req.payload_len);
  }
  if (fragment) {
    qp.frag_received += req.payload_len;
    qp.frag_active = true;
    if (!(req.flags & wire::kFlagLastFragment)) return false;  // more to come
    qp.frag_active = false;
    qp.frag_received = 0;
  }
  if (imm) CompleteWriteImm(qp, slot, req);
  qp.epsn = PsnAdd(qp.epsn, 1);
  return true;
}

// A READ: its range checked against the MR now, read as its response goes
// out (FlushResponses). false: refused, the QP is in ERR.
bool QueueReadResponse(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                       const wire::OneSidedEth& eth, uint32_t pd_id) {
  if (req.total_len > 0) {
    uint64_t host = 0;
    if (engine.mr_table().Lookup(KeyKind::kRemote, eth.rkey, eth.remote_addr, req.total_len, pd_id,
                                 IBV_ACCESS_REMOTE_READ, &host, qp.qpx.qp_base.qp_num) != 0)
      return Violation(engine, qp, req, wire::Syndrome::kNakRemoteAccess);
  }
  PendingResponse r{};
  r.kind = PendingResponse::kRead;
  r.psn = req.psn;
  r.rkey = eth.rkey;
  r.addr = eth.remote_addr;
  r.len = req.total_len;
  r.pd_id = pd_id;
  qp.responses.push_back(r);
  qp.rd_resources.RecordRead(req.psn, req.psn, eth.remote_addr, eth.rkey, req.total_len, pd_id);
  return true;
}

// An atomic: executed now, its result queued as the response and remembered
// for a duplicate. false: refused, the QP is in ERR.
bool ExecuteAtomicRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                          const wire::OneSidedEth& eth, uint32_t pd_id) {
  if (req.total_len != 8 || (eth.remote_addr & 7))
    return Violation(engine, qp, req, wire::Syndrome::kNakInvalidRequest);
  RegionHold hold(engine, qp, pd_id, eth.rkey, eth.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC);
  if (!hold.ok()) return Violation(engine, qp, req, wire::Syndrome::kNakRemoteAccess);
  AtomicLocks locks(engine.registry().atomic_lock_words());
  AtomicOp op{(req.flags & wire::kFlagCmpSwap) != 0, eth.compare_add, eth.swap};
  PendingResponse r{};
  r.kind = PendingResponse::kAtomic;
  r.psn = req.psn;
  ExecuteAtomic(locks, SelfPid(), engine.me().slot, hold.host(), op, &r.value);
  qp.responses.push_back(r);
  qp.rd_resources.RecordAtomic(req.psn, eth.remote_addr, eth.rkey, r.value, pd_id);
  return true;
}

}  // namespace

bool OnOneSidedRequest(Engine& engine, Qp& qp, const wire::RecordHeader& req,
                       const shm::RecordView& view) {
  if (req.type == wire::RecordType::kRemoteError) {
    EnterError(engine, qp);
    return false;
  }
  if (req.psn != qp.epsn && !PsnBefore(req.psn, qp.epsn)) {
    // From the future (after a NAK): dropped (see OnRequest).
    if (qp.xrc_fwd_pending) qp.xrc_fwd_dropped = true;
    return false;
  }
  wire::OneSidedEth eth;
  if (view.size() < sizeof req + sizeof eth ||
      view.size() - sizeof req - sizeof eth < req.payload_len)
    return false;  // malformed: drop
  view.CopyOut(sizeof req, &eth, sizeof eth);
  if (req.psn != qp.epsn) return OnDuplicateRequest(engine, qp, req, eth);

  // The PD rkeys are checked against: the QP's, or for an XRC target (no
  // PD) that of the SRQ the request names; an SRQ that is not here or of
  // another domain makes it an invalid request, as for a SEND.
  XrcSrqBinding binding{qp};
  uint32_t pd_id = 0;
  if (qp.type == IBV_QPT_XRC_RECV) {
    if (!BindXrcSrq(qp, req.rnr_timer))
      return Violation(engine, qp, req, wire::Syndrome::kNakInvalidRequest);
    pd_id = qp.srq->pd()->id;
  } else {
    pd_id = qp.pd->id;
  }

  uint32_t need = req.type == wire::RecordType::kRead     ? IBV_ACCESS_REMOTE_READ
                  : req.type == wire::RecordType::kAtomic ? IBV_ACCESS_REMOTE_ATOMIC
                                                          : IBV_ACCESS_REMOTE_WRITE;
  if (!(qp.attr.qp_access_flags & need))
    return Violation(engine, qp, req, wire::Syndrome::kNakRemoteAccess);
  // No responder resources for READ/atomic (rc-transport.md §4.1 rule 4).
  if (need != IBV_ACCESS_REMOTE_WRITE && qp.attr.max_dest_rd_atomic == 0)
    return Violation(engine, qp, req, wire::Syndrome::kNakInvalidRequest);

  bool answered = false;
  switch (req.type) {
    case wire::RecordType::kWrite:
      return ExecuteWrite(engine, qp, req, view, eth, pd_id);
    case wire::RecordType::kRead:
      answered = QueueReadResponse(engine, qp, req, eth, pd_id);
      break;
    case wire::RecordType::kAtomic:
      answered = ExecuteAtomicRequest(engine, qp, req, eth, pd_id);
      break;
    default:
      break;
  }
  if (!answered) return false;
  qp.epsn = PsnAdd(qp.epsn, 1);
  if (!FlushResponses(engine, qp)) engine.NeedService(&qp);
  return false;  // the response is the acknowledgement
}

bool FlushResponses(Engine& engine, Qp& qp) {
  if (!qp.peer) {
    qp.responses.clear();
    return true;
  }
  while (!qp.responses.empty()) {
    PendingResponse& r = qp.responses.front();
    wire::RecordHeader h{};
    h.src_qpn = qp.qpx.qp_base.qp_num;
    h.dst_qpn = qp.attr.dest_qp_num;
    h.psn = r.psn;
    h.src_slot = engine.me().slot;
    h.src_gen = engine.me().gen;
    if (r.kind == PendingResponse::kAckRecord) {
      h.type = wire::RecordType::kAck;
      h.syndrome = static_cast<wire::Syndrome>(r.syndrome);
      h.rnr_timer = static_cast<uint32_t>(r.value);
      if (!engine.Send(*qp.peer, h, nullptr, 0)) return false;
    } else if (r.kind == PendingResponse::kAtomic) {
      h.type = wire::RecordType::kAtomicResponse;
      h.total_len = 8;
      h.payload_len = 8;
      h.flags = wire::kFlagLastFragment;
      if (!engine.Send(*qp.peer, h, &r.value, 8)) return false;
    } else {
      uint32_t chunk = std::min(kResponseChunk, r.len - r.sent);
      RegionHold hold(engine, qp, r.pd_id, r.rkey, r.addr + r.sent, chunk, IBV_ACCESS_REMOTE_READ);
      if (chunk && !hold.ok()) {
        // Deregistered while the response was going out.
        r.kind = PendingResponse::kAckRecord;
        r.syndrome = static_cast<uint8_t>(wire::Syndrome::kNakRemoteAccess);
        continue;
      }
      h.type = wire::RecordType::kReadResponse;
      h.total_len = r.len;
      h.frag_offset = r.sent;
      h.payload_len = chunk;
      h.flags = r.sent + chunk == r.len ? wire::kFlagLastFragment : 0;
      if (!engine.Send(*qp.peer, h, reinterpret_cast<const void*>(hold.host()), chunk))
        return false;
      r.sent += chunk;
      if (r.sent < r.len) continue;
    }
    qp.responses.pop_front();
  }
  return true;
}

// ---------------------------------------------------------------- completer

void OnOneSidedResponse(Engine& engine, Qp& qp, const wire::RecordHeader& resp,
                        const shm::RecordView& view) {
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD && qp.state != IBV_QPS_SQE) return;
  if (resp.src_qpn != qp.attr.dest_qp_num) return;
  if (view.size() < sizeof resp || view.size() - sizeof resp < resp.payload_len) return;
  uint32_t index = qp.sq.tail;
  for (; index != qp.sq.head; ++index) {
    const SendWqe& w = qp.sq.at(index);
    if (w.has_psn && w.psn == resp.psn) break;
  }
  if (index == qp.sq.head) return;  // stale
  SendWqe& w = qp.sq.at(index);
  const bool read = resp.type == wire::RecordType::kReadResponse;
  if (read != (w.opcode == IBV_WR_RDMA_READ) || (!read && !IsAtomic(w.opcode)) || w.resp_done)
    return;
  qp.last_ack_ns = NowNs();
  qp.retries_left = qp.attr.retry_cnt;
  if (read && resp.frag_offset != w.rx_offset) return;  // a duplicate piece
  iovec local[limits::kMaxSge];
  int nlocal = ResolveLocalSges(engine, qp, DirectOpOf(qp, index), IBV_ACCESS_LOCAL_WRITE, local);
  if (nlocal < 0 || (!read && (nlocal != 1 || resp.payload_len != 8))) {
    RetireAcked(qp, resp.psn, /*inclusive=*/false);
    if (qp.sq.tail == index) FailSendHead(engine, qp, IBV_WC_LOC_PROT_ERR);
    return;
  }
  uint64_t off = read ? resp.frag_offset : 0, len = resp.payload_len;
  uint32_t src = sizeof resp;
  for (int i = 0; i < nlocal && len; ++i) {
    if (off >= local[i].iov_len) {
      off -= local[i].iov_len;
      continue;
    }
    uint64_t take = std::min<uint64_t>(local[i].iov_len - off, len);
    view.CopyOut(src, static_cast<uint8_t*>(local[i].iov_base) + off, static_cast<uint32_t>(take));
    src += static_cast<uint32_t>(take);
    len -= take;
    off = 0;
  }
  w.rx_offset += resp.payload_len;
  if (resp.flags & wire::kFlagLastFragment) {
    w.resp_done = true;
    RetireAcked(qp, resp.psn, /*inclusive=*/true);
  }
  if (qp.tx_blocked) engine.NeedService(&qp);
}

// ---------------------------------------------------------------- publishing

void PublishQp(Engine& engine, Qp& qp, bool destroyed) {
  PublishedQp* e = engine.registry().published_qp(qp.qpx.qp_base.qp_num);
  if (!e) return;
  QpSnapshot s{};
  s.owner_slot = engine.me().slot;
  s.owner_gen = engine.me().gen;
  // An XRC target has no PD: it publishes its domain (transport/xrc.h).
  s.pd_id = qp.pd ? qp.pd->id : qp.xrcd ? qp.xrcd->token : 0;
  s.access =
      qp.attr.qp_access_flags | (qp.attr.max_dest_rd_atomic == 0 ? kPublishedNoReadResources : 0u);
  s.state = destroyed ? IBV_QPS_RESET : qp.state;
  s.dest_qpn = qp.attr.dest_qp_num;
  s.type = qp.type;
  PublishQpEntry(*e, s);
}

}  // namespace softrdma::transport
