// ibv_create_qp_ex and the ibv_wr_* work-request API (see verbs_qp_ex.h).
#include "core/verbs_qp_ex.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>

#include "core/objects.h"
#include "core/qp.h"
#include "core/qp_state_machine.h"
#include "core/verbs.h"
#include "transport/engine.h"
#include "transport/transport.h"

namespace softrdma {

void DestroyWrBatch(WrBatch* batch) {
  delete batch;
}

namespace {

// send_ops_flags that map onto an ibv_send_wr opcode. Whether the transport
// executes that opcode on this QP type is its decision, reported by
// ibv_wr_complete exactly as ibv_post_send reports it. TSO (needs UD and
// max_tso) and ATOMIC_WRITE (no ibv_send_wr encoding, so the transport could
// never see it) cannot be honoured: asking for them fails creation.
constexpr uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                              IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                              IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

constexpr uint32_t kGsiSourceQpn = 1;

constexpr uint32_t kKnownCompMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                                    IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                    IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                    IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

int CheckInitAttrEx(ibv_context* context, const ibv_qp_init_attr_ex& a) {
  if (a.comp_mask & ~kKnownCompMask) return EINVAL;
  // Features with nothing behind them. A zero-valued CREATE_FLAGS or
  // MAX_TSO_HEADER asks for nothing and is honoured trivially.
  // XRCD matters only to XRC targets (verbs_xrc.cpp); others ignore it.
  if (a.comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) return EOPNOTSUPP;
  // The creation flags with something behind them: no multicast loopback
  // to the sending QP itself (transport/datagram.cpp), and a UD QP that
  // sends as QP1, the GSI (the CM's; docs/design.md "Other hosts"); no other
  // source QPN can be taken.
  if ((a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
      (a.create_flags & ~(IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SOURCE_QPN)))
    return EOPNOTSUPP;
  if ((a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
      (a.create_flags & IBV_QP_CREATE_SOURCE_QPN) &&
      (a.qp_type != IBV_QPT_UD || a.source_qpn != kGsiSourceQpn))
    return EOPNOTSUPP;
  if ((a.comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) && a.max_tso_header) return EOPNOTSUPP;
  if ((a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a.send_ops_flags & ~kSendOps))
    return EOPNOTSUPP;
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd || a.pd->context != context) return EINVAL;
  return 0;
}

WrBatch& Batch(ibv_qp_ex* qpx) {
  return *Qp::From(&qpx->qp_base)->wr_batch;
}

void Latch(WrBatch& b, int err) {
  if (!b.error) b.error = err;
}

// Starts the next WR of the batch from the caller's qpx->wr_id / wr_flags.
ibv_send_wr& BeginWr(ibv_qp_ex* qpx, ibv_wr_opcode opcode) {
  WrBatch& b = Batch(qpx);
  uint32_t index = b.count;
  if (index < b.capacity) {
    ++b.count;
  } else {
    Latch(b, ENOMEM);  // more WRs than the send queue can ever hold
    index = b.capacity;
  }
  ibv_send_wr& w = b.wrs[index];
  w = ibv_send_wr{};
  w.wr_id = qpx->wr_id;
  w.opcode = opcode;
  w.send_flags = qpx->wr_flags;
  w.sg_list = b.sge_slot(index);
  b.cur = &w;
  b.cur_index = index;
  return w;
}

// The setters apply to the WR started last; without one they are misuse.
ibv_send_wr* Current(ibv_qp_ex* qpx) {
  WrBatch& b = Batch(qpx);
  if (!b.cur) Latch(b, EINVAL);
  return b.cur;
}

// --- opcodes
void WrSend(ibv_qp_ex* qpx) {
  BeginWr(qpx, IBV_WR_SEND);
}
void WrSendImm(ibv_qp_ex* qpx, __be32 imm) {
  BeginWr(qpx, IBV_WR_SEND_WITH_IMM).imm_data = imm;
}
void WrSendInv(ibv_qp_ex* qpx, uint32_t rkey) {
  BeginWr(qpx, IBV_WR_SEND_WITH_INV).invalidate_rkey = rkey;
}
void WrSendTso(ibv_qp_ex* qpx, void* hdr, uint16_t hdr_sz, uint16_t mss) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_TSO);
  w.tso.hdr = hdr;
  w.tso.hdr_sz = hdr_sz;
  w.tso.mss = mss;
}
void WrRdmaWrite(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_RDMA_WRITE);
  w.wr.rdma.remote_addr = addr;
  w.wr.rdma.rkey = rkey;
}
void WrRdmaWriteImm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, __be32 imm) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
  w.wr.rdma.remote_addr = addr;
  w.wr.rdma.rkey = rkey;
  w.imm_data = imm;
}
void WrRdmaRead(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_RDMA_READ);
  w.wr.rdma.remote_addr = addr;
  w.wr.rdma.rkey = rkey;
}
void WrAtomicCmpSwp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
  w.wr.atomic = {addr, compare, swap, rkey};
}
void WrAtomicFetchAdd(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t add) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
  w.wr.atomic = {addr, add, 0, rkey};
}
void WrAtomicWrite(ibv_qp_ex* qpx, uint32_t, uint64_t, const void*) {
  // ibv_send_wr has no field for the 8 bytes to write; see kSendOps.
  BeginWr(qpx, IBV_WR_ATOMIC_WRITE);
  Latch(Batch(qpx), EOPNOTSUPP);
}
void WrBindMw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  ibv_send_wr& w = BeginWr(qpx, IBV_WR_BIND_MW);
  w.bind_mw.mw = mw;
  w.bind_mw.rkey = rkey;
  if (info) w.bind_mw.bind_info = *info;
}
void WrLocalInv(ibv_qp_ex* qpx, uint32_t rkey) {
  BeginWr(qpx, IBV_WR_LOCAL_INV).invalidate_rkey = rkey;
}

// --- addressing
void WrSetUdAddr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  if (ibv_send_wr* w = Current(qpx)) w->wr.ud = {ah, qpn, qkey};
}
void WrSetXrcSrqn(ibv_qp_ex* qpx, uint32_t srqn) {
  if (ibv_send_wr* w = Current(qpx)) w->qp_type.xrc.remote_srqn = srqn;
}

// --- payload
void WrSetSge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  ibv_send_wr* w = Current(qpx);
  if (!w) return;
  w->sg_list[0] = ibv_sge{addr, length, lkey};
  w->num_sge = 1;
  w->send_flags &= ~IBV_SEND_INLINE;  // the data is referenced, not copied
}
void WrSetSgeList(ibv_qp_ex* qpx, size_t n, const ibv_sge* list) {
  ibv_send_wr* w = Current(qpx);
  if (!w) return;
  WrBatch& b = Batch(qpx);
  w->send_flags &= ~IBV_SEND_INLINE;
  if (n > b.max_sge || (n && !list)) {
    Latch(b, EINVAL);  // as ibv_post_send with num_sge > max_send_sge
    return;
  }
  if (n) memcpy(w->sg_list, list, n * sizeof *list);
  w->num_sge = static_cast<int>(n);
}
// Inline data is copied now: the caller may reuse its buffer as soon as the
// setter returns (ibv_wr_post(3)). The WR then carries one SGE pointing at
// the copy, flagged IBV_SEND_INLINE, which the transport copies at post.
void WrSetInlineDataList(ibv_qp_ex* qpx, size_t n, const ibv_data_buf* bufs) {
  ibv_send_wr* w = Current(qpx);
  if (!w) return;
  WrBatch& b = Batch(qpx);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += bufs[i].length;
  w->send_flags |= IBV_SEND_INLINE;
  w->num_sge = 0;
  if (total > b.max_inline) {
    Latch(b, EINVAL);  // as ibv_post_send with an inline WR above max_inline_data
    return;
  }
  uint8_t* dst = b.inline_slot(b.cur_index);
  for (size_t i = 0; i < n; ++i) {
    if (!bufs[i].length) continue;  // its addr may be NULL
    memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  if (total) {
    w->sg_list[0] = ibv_sge{reinterpret_cast<uintptr_t>(b.inline_slot(b.cur_index)),
                            static_cast<uint32_t>(total), 0};
    w->num_sge = 1;
  }
}
void WrSetInlineData(ibv_qp_ex* qpx, void* addr, size_t length) {
  ibv_data_buf one{addr, length};
  WrSetInlineDataList(qpx, 1, &one);
}

// --- batch
void WrStart(ibv_qp_ex* qpx) {
  WrBatch& b = Batch(qpx);
  b.session.lock();
  b.count = 0;
  b.cur = nullptr;
  b.error = 0;
}

void EndBatch(WrBatch& b) {
  b.count = 0;
  b.cur = nullptr;
  b.error = 0;
  b.session.unlock();
}

// Everything ibv_post_send would refuse synchronously, checked for the
// whole batch before any of it is queued.
int CheckBatch(Qp& qp, WrBatch& b) {
  if (int rc = CheckPostSendState(qp.state)) return rc;
  if (qp.sq.capacity() - qp.sq.size() < b.count) return ENOMEM;
  for (uint32_t i = 0; i < b.count; ++i) {
    uint64_t total = 0;
    if (int rc = transport::ValidateSendWr(qp, b.wrs[i], &total)) return rc;
  }
  return 0;
}

int WrComplete(ibv_qp_ex* qpx) {
  Qp& qp = *Qp::From(&qpx->qp_base);
  WrBatch& b = *qp.wr_batch;
  int rc = b.error;
  if (rc == 0 && b.count > 0) {
    for (uint32_t i = 0; i + 1 < b.count; ++i) b.wrs[i].next = &b.wrs[i + 1];
    b.wrs[b.count - 1].next = nullptr;
    Engine* engine = Engine::Get(nullptr);
    std::lock_guard<SpinLock> lock(qp.lock);
    rc = engine ? CheckBatch(qp, b) : EIO;
    if (rc == 0) {
      ibv_send_wr* bad = nullptr;
      rc = transport::PostSend(*engine, qp, &b.wrs[0], &bad);
    }
  }
  EndBatch(b);
  return rc;
}

void WrAbort(ibv_qp_ex* qpx) {
  EndBatch(Batch(qpx));
}

}  // namespace

int EnableWrApi(Qp& qp) {
  auto* b = new (std::nothrow) WrBatch();
  if (!b) return ENOMEM;
  qp.wr_batch.reset(b);
  b->capacity = qp.cap.max_send_wr;
  b->max_sge = qp.cap.max_send_sge ? qp.cap.max_send_sge : 1;
  b->max_inline = qp.cap.max_inline_data;
  const size_t slots = static_cast<size_t>(b->capacity) + 1;
  // Default-initialised arrays: large ones stay untouched (and so cost no
  // memory) until a batch really uses them.
  b->wrs.reset(new (std::nothrow) ibv_send_wr[slots]);
  b->sges.reset(new (std::nothrow) ibv_sge[slots * b->max_sge]);
  b->inline_data.reset(new (std::nothrow) uint8_t[slots * b->max_inline + 1]);
  if (!b->wrs || !b->sges || !b->inline_data) return ENOMEM;

  ibv_qp_ex& x = qp.qpx;
  x.wr_start = WrStart;
  x.wr_complete = WrComplete;
  x.wr_abort = WrAbort;
  x.wr_send = WrSend;
  x.wr_send_imm = WrSendImm;
  x.wr_send_inv = WrSendInv;
  x.wr_send_tso = WrSendTso;
  x.wr_rdma_write = WrRdmaWrite;
  x.wr_rdma_write_imm = WrRdmaWriteImm;
  x.wr_rdma_read = WrRdmaRead;
  x.wr_atomic_cmp_swp = WrAtomicCmpSwp;
  x.wr_atomic_fetch_add = WrAtomicFetchAdd;
  x.wr_atomic_write = WrAtomicWrite;
  x.wr_bind_mw = WrBindMw;
  x.wr_local_inv = WrLocalInv;
  x.wr_set_ud_addr = WrSetUdAddr;
  x.wr_set_xrc_srqn = WrSetXrcSrqn;
  x.wr_set_sge = WrSetSge;
  x.wr_set_sge_list = WrSetSgeList;
  x.wr_set_inline_data = WrSetInlineData;
  x.wr_set_inline_data_list = WrSetInlineDataList;
  return 0;
}

namespace verbs {

ibv_qp* CreateQpEx(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (!context || !attr) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->qp_type == IBV_QPT_XRC_RECV) {
    if (attr->comp_mask & ~kKnownCompMask) {
      errno = EINVAL;
      return nullptr;
    }
    return CreateXrcTargetQp(context, attr);
  }
  if (int rc = CheckInitAttrEx(context, *attr)) {
    errno = rc;
    return nullptr;
  }
  // Everything else is what ibv_create_qp does, so every QP type it
  // supports is available here too.
  ibv_qp_init_attr base{};
  base.qp_context = attr->qp_context;
  base.send_cq = attr->send_cq;
  base.recv_cq = attr->recv_cq;
  base.srq = attr->srq;
  base.cap = attr->cap;
  base.qp_type = attr->qp_type;
  base.sq_sig_all = attr->sq_sig_all;
  ibv_qp* ibqp = CreateQp(attr->pd, &base);
  if (!ibqp) return nullptr;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    if (int rc = EnableWrApi(*Qp::From(ibqp))) {
      DestroyQp(ibqp);
      errno = rc;
      return nullptr;
    }
  }
  if (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
    Qp::From(ibqp)->block_self_mcast_loopback =
        attr->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
    Qp::From(ibqp)->gsi_agent = attr->create_flags & IBV_QP_CREATE_SOURCE_QPN;
  }
  attr->cap = base.cap;
  return ibqp;
}

// As in rdma-core, only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
// have the work-request API; for the others the function table is empty,
// so handing out the ibv_qp_ex would invite a call through NULL.
ibv_qp_ex* QpToQpEx(ibv_qp* ibqp) {
  if (!ibqp) return nullptr;
  Qp* qp = Qp::From(ibqp);
  return qp->wr_batch ? &qp->qpx : nullptr;
}

}  // namespace verbs

}  // namespace softrdma
