// Queue pairs: creation, the state machine (rules in qp_state_machine.cpp),
// queries, and the posting entry points the header inlines reach through
// ibv_context.ops.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/device.h"
#include "core/limits.h"
#include "core/qp.h"
#include "core/qp_state_machine.h"
#include "core/srq.h"
#include "core/verbs.h"
#include "transport/engine.h"
#include "transport/roce/roce_qp.h"
#include "transport/sq_drain.h"
#include "transport/transport.h"
#include "util/log.h"

namespace softrdma::verbs {

namespace {

std::atomic<uint32_t> g_next_qp_handle{1};

int ValidateInitAttr(ibv_pd* pd, const ibv_qp_init_attr* a) {
  if (!pd || !a || !a->send_cq) return EINVAL;
  // An XRC initiator has no receive side: no receive CQ, no SRQ
  // (xsrq_pingpong passes neither). XRC targets are made in verbs_xrc.cpp.
  const bool xrc_send = a->qp_type == IBV_QPT_XRC_SEND;
  if (xrc_send ? a->srq != nullptr : !a->recv_cq) return EINVAL;
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD && !xrc_send)
    return EOPNOTSUPP;  // raw packet: not implemented yet
  if (a->srq && a->srq->pd->context != pd->context) return EINVAL;
  const ibv_qp_cap& c = a->cap;
  // With an SRQ the receive capabilities are the SRQ's, and ignored here.
  if (c.max_send_wr > static_cast<uint32_t>(limits::kMaxQpWr) ||
      (!a->srq && c.max_recv_wr > static_cast<uint32_t>(limits::kMaxQpWr)) ||
      c.max_send_sge > static_cast<uint32_t>(limits::kMaxSge) ||
      (!a->srq && c.max_recv_sge > static_cast<uint32_t>(limits::kMaxSge)) ||
      c.max_inline_data > static_cast<uint32_t>(limits::kMaxInlineData))
    return EINVAL;
  return 0;
}

constexpr uint32_t kMinInlineData = 64;

// Copies the attributes named by `mask` into the QP (after validation).
void ApplyAttributes(Qp& qp, const ibv_qp_attr& a, int mask) {
  ibv_qp_attr& s = qp.attr;
  if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) s.port_num = a.port_num;
  if (mask & IBV_QP_QKEY) s.qkey = a.qkey;
  if (mask & IBV_QP_AV) s.ah_attr = a.ah_attr;
  if (mask & IBV_QP_PATH_MTU) s.path_mtu = a.path_mtu;
  if (mask & IBV_QP_TIMEOUT) s.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) s.rq_psn = a.rq_psn & 0xffffff;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) s.sq_psn = a.sq_psn & 0xffffff;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_PATH_MIG_STATE) s.path_mig_state = a.path_mig_state;
  if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = a.dest_qp_num & 0xffffff;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) s.en_sqd_async_notify = a.en_sqd_async_notify;
}

}  // namespace

ibv_qp* CreateQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  int rc = ValidateInitAttr(pd, attr);
  if (rc) {
    errno = rc;
    return nullptr;
  }
  return BuildQp(pd->context, pd, attr);
}

// pd, send_cq and recv_cq may be NULL (XRC targets have none; XRC initiators
// no receive CQ); the caller has validated everything else.
ibv_qp* BuildQp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* attr) {
  Status st;
  Engine* engine = Engine::Get(&st);
  if (!engine) {
    errno = st.code() ? st.code() : EIO;
    return nullptr;
  }
  auto* qp = new (std::nothrow) Qp();
  if (!qp) {
    errno = ENOMEM;
    return nullptr;
  }
  qp->ctx = Context::From(context);
  qp->pd = pd ? Pd::From(pd) : nullptr;
  qp->send_cq = attr->send_cq ? Cq::From(attr->send_cq) : nullptr;
  qp->recv_cq = attr->recv_cq ? Cq::From(attr->recv_cq) : nullptr;
  qp->type = attr->qp_type;
  if (attr->qp_type != IBV_QPT_XRC_RECV) {
    // Like a NIC's send WQE, a QP holds inline data at least as large as
    // its SGE list (16 bytes per SGE) and never less than one cache line,
    // whatever was asked: programs that ask for 0 and post small inline
    // SENDs (rdma_xclient) work on hardware, and ibv_create_qp(3) reports
    // the value granted in cap.
    uint32_t floor = std::max<uint32_t>(kMinInlineData, attr->cap.max_send_sge * 16);
    floor = std::min<uint32_t>(floor, static_cast<uint32_t>(limits::kMaxInlineData));
    attr->cap.max_inline_data = std::max(attr->cap.max_inline_data, floor);
  }
  qp->cap = attr->cap;
  if (attr->srq) {
    qp->srq = Srq::From(attr->srq);
    qp->srq_sges.resize(qp->srq->max_sge());
    qp->cap.max_recv_wr = 0;
    qp->cap.max_recv_sge = 0;
  }
  if (attr->qp_type == IBV_QPT_XRC_SEND || attr->qp_type == IBV_QPT_XRC_RECV) {
    qp->cap.max_recv_wr = 0;
    qp->cap.max_recv_sge = 0;
  }
  qp->sq_sig_all = attr->sq_sig_all != 0;
  qp->sq.Init(attr->cap.max_send_wr, attr->cap.max_send_sge);
  qp->rq.Init(qp->cap.max_recv_wr, qp->cap.max_recv_sge);
  qp->inline_buf.reset(
      new uint8_t[static_cast<size_t>(qp->sq.slots()) * attr->cap.max_inline_data]);

  uint32_t qpn = 0;
  st = engine->RegisterQp(qp, &qpn);
  if (!st.ok()) {
    delete qp;
    errno = st.code();
    return nullptr;
  }
  ibv_qp& q = qp->qpx.qp_base;
  q.context = context;
  q.qp_context = attr->qp_context;
  q.pd = pd;
  q.send_cq = attr->send_cq;
  q.recv_cq = attr->recv_cq;
  q.srq = attr->srq;
  q.handle = g_next_qp_handle.fetch_add(1);
  q.qp_num = qpn;
  q.state = IBV_QPS_RESET;
  q.qp_type = attr->qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  if (qp->pd) qp->pd->users.fetch_add(1);
  if (qp->send_cq) qp->send_cq->users.fetch_add(1);
  if (qp->recv_cq) qp->recv_cq->users.fetch_add(1);
  if (qp->srq) qp->srq->users.fetch_add(1);
  transport::PublishQp(*engine, *qp);
  return &q;
}

int ModifyQp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  if (!ibqp || !attr) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EIO;
  Qp& qp = *Qp::From(ibqp);
  if (qp.xrc_foreign) return EOPNOTSUPP;  // the QP lives in another process
  // Before the QP stops: what reached it is executed and acknowledged, so
  // that the flush overtakes neither (Engine::SettleBeforeError).
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR) engine->SettleBeforeError();
  // A reset forgets the RoCE connection: what reached it first is settled
  // the same way (the shm wire's QP simply stops, as before).
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) engine->SettleRoce();
  std::lock_guard<SpinLock> lock(qp.lock);
  // The kernel drops, before any check, the attributes of the side an XRC
  // QP has not got (uverbs' modify_qp_mask): perftest -c XRC passes RC's
  // full masks to both kinds of XRC QP.
  if (qp.type == IBV_QPT_XRC_SEND) mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (qp.type == IBV_QPT_XRC_RECV)
    mask &= ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);

  ModifyContext mctx;
  mctx.valid_gid_mask = Device::Get().ValidGidMask();
  mctx.port_max_mtu = limits::kMaxMtu;
  ibv_qp_state next = qp.state;
  int rc = CheckModifyQp(qp.type, qp.state, *attr, mask, mctx, &next);
  if (rc) {
    SOFTRDMA_LOG(kDebug, "modify QP %u %s->%s mask 0x%x refused: %s", ibqp->qp_num,
                 QpStateName(qp.state), QpStateName(next), mask, strerror(rc));
    return rc;
  }
  ApplyAttributes(qp, *attr, mask);
  const ibv_qp_state prev = qp.state;
  if (next == IBV_QPS_RESET) {
    // The QP's completions still queued go too, as mlx4, mlx5 and hns
    // clean the CQs on reset (rxe leaves them): what a program polls after
    // bringing a reset QP up again belongs to its new life. Under the QP's
    // lock, so no completion of the QP is being added meanwhile.
    Cq* cqs[] = {qp.send_cq, qp.recv_cq != qp.send_cq ? qp.recv_cq : nullptr};
    transport::ResetQueues(qp);
    for (Cq* cq : cqs)
      if (cq) cq->RemoveQpCompletions(ibqp->qp_num);
    qp.peer.reset();
    if (qp.roce) transport::roce::SendOwedAck(*engine, qp);  // what it executed is not undone
    qp.roce.reset();
  }
  if (next == IBV_QPS_RTR && prev == IBV_QPS_INIT) {
    qp.epsn = qp.attr.rq_psn;
    // The peer is found by (GID, QPN); the wire is chosen here, per peer
    // (docs/design.md "RoCEv2 transport").
    transport::ChooseWire(*engine, qp);
  }
  if (next == IBV_QPS_RTS && prev == IBV_QPS_RTR) {
    qp.next_psn = qp.attr.sq_psn;
    qp.retries_left = qp.attr.retry_cnt;
    qp.rnr_retries_left = qp.attr.rnr_retry;
  }
  qp.state = next;
  ibqp->state = next;
  if (next == IBV_QPS_ERR && prev != IBV_QPS_ERR) transport::EnterError(*engine, qp);
  // The event is asked for by this modify only (IBA: "if requested in the
  // transition to SQD"), not by an en_sqd_async_notify stored before.
  if (next == IBV_QPS_SQD && prev != IBV_QPS_SQD)
    transport::BeginSqDrain(qp, (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify);
  transport::PublishQp(*engine, qp);  // for initiators of one-sided operations
  if (next == IBV_QPS_RTS) transport::Transmit(*engine, qp);  // WQEs queued in SQD
  return 0;
}

int QueryQp(ibv_qp* ibqp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  if (!ibqp || !attr || !init_attr) return EINVAL;
  Qp& qp = *Qp::From(ibqp);
  if (qp.xrc_foreign) return QueryForeignTarget(qp, attr, init_attr);  // verbs_xrc.cpp
  std::lock_guard<SpinLock> lock(qp.lock);
  *attr = qp.attr;
  attr->qp_state = qp.state;
  attr->cur_qp_state = qp.state;
  attr->cap = qp.cap;
  attr->sq_draining = transport::SqDraining(qp);
  memset(init_attr, 0, sizeof *init_attr);
  init_attr->qp_context = ibqp->qp_context;
  init_attr->send_cq = ibqp->send_cq;
  init_attr->recv_cq = ibqp->recv_cq;
  init_attr->srq = ibqp->srq;
  init_attr->cap = qp.cap;
  init_attr->qp_type = qp.type;
  init_attr->sq_sig_all = qp.sq_sig_all;
  return 0;
}

int DestroyQp(ibv_qp* ibqp) {
  if (!ibqp) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EIO;
  Qp* qp = Qp::From(ibqp);
  if (qp->xrc_foreign) {
    if (qp->ctx) qp->ctx->async_events.Retire(&qp->async_events);
    DestroyForeignTarget(qp);  // the QP itself lives on in its process
    return 0;
  }
  // An XRC target lives until its last handle is closed (verbs_xrc.cpp).
  if (qp->type == IBV_QPT_XRC_RECV && ReleaseXrcTarget(*qp)) return 0;
  {
    // As the kernel does for a destroy the application asks for: the
    // multicast groups must be detached first (a process that exits loses
    // its attachments anyway: host/mcast_groups.h).
    std::lock_guard<SpinLock> lock(qp->lock);
    if (qp->mcast_attachments) {
      errno = EBUSY;
      return EBUSY;
    }
  }
  {
    std::lock_guard<SpinLock> lock(qp->lock);
    transport::PublishQp(*engine, *qp, /*destroyed=*/true);
  }
  // After this no record is dispatched to the QP and no service runs on it.
  engine->UnregisterQp(qp);
  // So no event of it is raised any more: those not read yet are dropped,
  // and this waits for the application to acknowledge those it read
  // (core/async_events.h).
  qp->ctx->async_events.Retire(&qp->async_events);
  // Type 2 windows bound through this QP die with it: its number will be
  // handed out again.
  engine->mr_table().UnbindQpWindows(ibqp->qp_num);
  if (qp->pd) qp->pd->users.fetch_sub(1);
  if (qp->send_cq) qp->send_cq->users.fetch_sub(1);
  if (qp->type == IBV_QPT_XRC_RECV) {
    FinishXrcTarget(*qp);  // its srq/recv_cq are bindings, not attachments
  } else {
    if (qp->recv_cq) qp->recv_cq->users.fetch_sub(1);
    if (qp->srq) qp->srq->users.fetch_sub(1);
  }
  pthread_mutex_destroy(&ibqp->mutex);
  pthread_cond_destroy(&ibqp->cond);
  delete qp;
  return 0;
}

namespace {

// The transport's entry for a WR list: takes the QP's lock and posts.
template <typename Wr>
using LockAndPost = int (*)(Engine&, Qp&, Wr*, Wr**);

// ibv_post_send / ibv_post_recv with a null argument (bad_wr may be null: the
// WR chain is still posted; the QP or the chain may not), or before the
// engine exists.
template <typename Wr, LockAndPost<Wr> kPost>
[[gnu::noinline]] int PostSlow(ibv_qp* ibqp, Wr* wr, Wr** bad_wr) {
  Wr* ignored;
  if (!bad_wr) bad_wr = &ignored;
  if (!ibqp || !wr) {
    *bad_wr = wr;
    return EINVAL;
  }
  Engine* engine = Engine::Get(nullptr);
  return kPost(*engine, *Qp::From(ibqp), wr, bad_wr);
}

// A jump into the transport, which takes the QP's lock: no frame here.
template <typename Wr, LockAndPost<Wr> kPost>
[[gnu::always_inline]] inline int Post(ibv_qp* ibqp, Wr* wr, Wr** bad_wr) {
  Engine* engine = Engine::Current();
  if (!ibqp || !wr || !bad_wr || !engine) [[unlikely]]
    return PostSlow<Wr, kPost>(ibqp, wr, bad_wr);
  return kPost(*engine, *Qp::From(ibqp), wr, bad_wr);
}

}  // namespace

int PostSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return Post<ibv_send_wr, transport::LockAndPostSend>(ibqp, wr, bad_wr);
}

int PostRecv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return Post<ibv_recv_wr, transport::LockAndPostRecv>(ibqp, wr, bad_wr);
}

}  // namespace softrdma::verbs
