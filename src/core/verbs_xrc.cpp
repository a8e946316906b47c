// The verbs side of XRC: XRC SRQs (host-unique numbers, a domain and a CQ),
// XRC target QPs (no PD, no CQs, one handle per creator/opener) and
// ibv_open_qp. Domains are core/xrcd.*; the data path is transport/xrc.*.
#include <cerrno>
#include <mutex>
#include <new>

#include <pthread.h>

#include "core/cq.h"
#include "core/limits.h"
#include "core/qp.h"
#include "core/srq.h"
#include "core/verbs.h"
#include "core/xrcd.h"
#include "transport/engine.h"
#include "transport/xrc.h"

namespace softrdma::verbs {

int AttachXrcSrq(ibv_srq* ibsrq, const ibv_srq_init_attr_ex& init) {
  constexpr uint32_t kNeeded = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if ((init.comp_mask & kNeeded) != kNeeded || !init.xrcd || !init.cq) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EIO;
  // Numbers come from the registry's QPN space: unique on the host, and the
  // registry records the owning process, as for a QPN.
  uint32_t num = 0;
  Status st = engine->registry().AllocQpn(engine->me(), &num);
  if (!st.ok()) return st.code();
  Srq* srq = Srq::From(ibsrq);
  srq->set_srq_num(num);
  srq->xrcd = Xrcd::From(init.xrcd);
  srq->cq = Cq::From(init.cq);
  srq->xrcd->users.fetch_add(1);
  srq->cq->users.fetch_add(1);
  transport::RegisterXrcSrq(srq);
  transport::PublishXrcSrq(*engine, *srq);  // its PD, for RDMA and atomics through targets
  return 0;
}

void DetachXrcSrq(ibv_srq* ibsrq) {
  Srq* srq = Srq::From(ibsrq);
  Engine* engine = Engine::Get(nullptr);
  if (engine) transport::PublishXrcSrq(*engine, *srq, /*destroyed=*/true);
  transport::UnregisterXrcSrq(srq);
  transport::ForgetXrcForwards(srq);
  if (engine) engine->registry().FreeQpn(engine->me(), srq->srq_num());
  srq->xrcd->users.fetch_sub(1);
  srq->cq->users.fetch_sub(1);
}

ibv_qp* CreateXrcTargetQp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  // A target QP only responds: no PD (its SRQs have them), no CQs (its
  // SRQs' CQ get the completions), no send queue. What else is passed is
  // ignored, as the kernel does.
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd || attr->xrcd->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr base{};
  base.qp_context = attr->qp_context;
  base.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* ibqp = BuildQp(context, nullptr, &base);
  if (!ibqp) return nullptr;
  Qp* qp = Qp::From(ibqp);
  qp->xrcd = Xrcd::From(attr->xrcd);
  qp->xrcd->users.fetch_add(1);
  qp->srq_sges.resize(limits::kMaxSrqSge);  // room for any SRQ it binds to
  transport::RegisterXrcTarget(qp);
  attr->cap = ibv_qp_cap{};
  return ibqp;
}

bool ReleaseXrcTarget(Qp& qp) {
  return transport::ReleaseXrcTargetHandle(&qp);
}

void FinishXrcTarget(Qp& qp) {
  std::lock_guard<SpinLock> lock(qp.lock);
  qp.srq_wqe_held = false;  // a message cut short by destroy: its WQE is lost
  transport::UnbindXrcSrq(qp);
  qp.xrcd->users.fetch_sub(1);
}

namespace {

// ibv_open_qp of a target QP owned by another process. The QP stays there
// (messages reach its process, which hands those naming our SRQs over to
// us: transport/xrc_forward.cpp); the handle only names it. It does not keep
// the QP alive: the QP goes with its creator's last handle or its process.
ibv_qp* OpenForeignTarget(ibv_context* context, const ibv_qp_open_attr& attr, const Xrcd& xrcd,
                          Engine& engine, ProcRef owner) {
  const PublishedQp* e = engine.registry().published_qp(attr.qp_num);
  QpSnapshot s{};
  if (e) s = ReadQpEntry(*e);
  // Of our domain: its token (a hash of the domain file, the same in every
  // process) is ours. A private domain is never another process's.
  if (!e || s.owner_slot != owner.slot || s.owner_gen != owner.gen || s.type != IBV_QPT_XRC_RECV ||
      xrcd.private_id || s.pd_id != xrcd.token) {
    errno = EINVAL;
    return nullptr;
  }
  auto* qp = new (std::nothrow) Qp();
  if (!qp) {
    errno = ENOMEM;
    return nullptr;
  }
  qp->ctx = Context::From(context);
  qp->type = IBV_QPT_XRC_RECV;
  qp->xrc_foreign = true;
  qp->xrc_owner = owner;
  ibv_qp& q = *qp->verbs();
  q.context = context;
  q.qp_context = attr.qp_context;
  q.qp_num = attr.qp_num;
  q.qp_type = IBV_QPT_XRC_RECV;
  q.state = static_cast<ibv_qp_state>(s.state);
  q.handle = attr.qp_num;  // no kernel handle; unique enough for a name
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  return &q;
}

}  // namespace

ibv_qp* OpenQp(ibv_context* context, ibv_qp_open_attr* attr) {
  if (!context || !attr) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if ((attr->comp_mask & kNeeded) != kNeeded || !attr->xrcd || attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  // The handle is the QP itself (one more reference): modify, query and
  // destroy through it act on the shared target QP, as on a kernel's.
  const Xrcd& xrcd = *Xrcd::From(attr->xrcd);
  if (Qp* qp = transport::OpenXrcTarget(attr->qp_num, xrcd)) return qp->verbs();
  Engine* engine = Engine::Get(nullptr);
  ProcRef owner;
  if (engine && engine->registry().LookupQpn(attr->qp_num, &owner) && !(owner == engine->me()))
    return OpenForeignTarget(context, *attr, xrcd, *engine, owner);
  errno = EINVAL;  // no such target QP in the domain (the kernel's answer)
  return nullptr;
}

int QueryForeignTarget(Qp& qp, ibv_qp_attr* attr, ibv_qp_init_attr* init_attr) {
  *attr = ibv_qp_attr{};
  *init_attr = ibv_qp_init_attr{};
  Engine* engine = Engine::Get(nullptr);
  const uint32_t qpn = qp.verbs()->qp_num;
  const PublishedQp* e = engine ? engine->registry().published_qp(qpn) : nullptr;
  ProcRef owner;
  // Gone with its process or destroyed there: reported as in ERR.
  ibv_qp_state state = IBV_QPS_ERR;
  if (e && engine->registry().LookupQpn(qpn, &owner) && owner == qp.xrc_owner) {
    QpSnapshot s = ReadQpEntry(*e);
    if (s.owner_slot == owner.slot && s.owner_gen == owner.gen)
      state = static_cast<ibv_qp_state>(s.state);
  }
  attr->qp_state = attr->cur_qp_state = state;
  qp.verbs()->state = state;
  init_attr->qp_context = qp.verbs()->qp_context;
  init_attr->qp_type = IBV_QPT_XRC_RECV;
  return 0;
}

void DestroyForeignTarget(Qp* qp) {
  pthread_mutex_destroy(&qp->verbs()->mutex);
  pthread_cond_destroy(&qp->verbs()->cond);
  delete qp;
}

}  // namespace softrdma::verbs
