// Shared receive queues: the verbs (ibv_create_srq[_ex], ibv_modify_srq,
// ibv_query_srq, ibv_destroy_srq, ibv_post_srq_recv, ibv_get_srq_num). The
// queue itself is core/srq.*; QPs draw from it in transport/recv_source.cpp.
#include <cerrno>
#include <new>

#include "core/cq.h"
#include "core/limits.h"
#include "core/srq.h"
#include "core/verbs.h"

namespace softrdma::verbs {

namespace {

std::atomic<uint32_t> g_next_srq_num{1};
std::atomic<uint32_t> g_next_srq_handle{1};
std::atomic<int> g_srq_count{0};

int ValidateSrqAttr(const ibv_srq_attr& a) {
  if (a.max_wr == 0 || a.max_wr > static_cast<uint32_t>(limits::kMaxSrqWr) ||
      a.max_sge > static_cast<uint32_t>(limits::kMaxSrqSge))
    return EINVAL;
  return 0;
}

ibv_srq* MakeSrq(ibv_pd* pd, void* srq_context, ibv_srq_attr* attr) {
  if (int rc = ValidateSrqAttr(*attr)) {
    errno = rc;
    return nullptr;
  }
  if (g_srq_count.fetch_add(1) >= limits::kMaxSrq) {
    g_srq_count.fetch_sub(1);
    errno = ENOMEM;
    return nullptr;
  }
  // A basic SRQ's number names it to nobody: unique in the process is
  // enough. XRC SRQs get a host-unique one (verbs_xrc.cpp).
  auto* srq = new (std::nothrow) Srq(Context::From(pd->context), Pd::From(pd), attr->max_wr,
                                     attr->max_sge, g_next_srq_num.fetch_add(1) & 0xffffff);
  if (!srq) {
    g_srq_count.fetch_sub(1);
    errno = ENOMEM;
    return nullptr;
  }
  ibv_srq& s = srq->srq;
  s.context = pd->context;
  s.srq_context = srq_context;
  s.pd = pd;
  s.handle = g_next_srq_handle.fetch_add(1);
  pthread_mutex_init(&s.mutex, nullptr);
  pthread_cond_init(&s.cond, nullptr);
  Pd::From(pd)->users.fetch_add(1);
  // What the application got (init-time srq_limit is ignored, ibv_create_srq.3).
  srq->Query(attr);
  return &s;
}

}  // namespace

ibv_srq* CreateSrq(ibv_pd* pd, ibv_srq_init_attr* init) {
  if (!pd || !init) {
    errno = EINVAL;
    return nullptr;
  }
  return MakeSrq(pd, init->srq_context, &init->attr);
}

ibv_srq* CreateSrqEx(ibv_context* context, ibv_srq_init_attr_ex* init) {
  if (!context || !init) {
    errno = EINVAL;
    return nullptr;
  }
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                              IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (init->comp_mask & ~kKnown) {
    errno = EINVAL;
    return nullptr;
  }
  const ibv_srq_type type =
      (init->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? init->srq_type : IBV_SRQT_BASIC;
  if ((type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) ||
      (init->comp_mask & IBV_SRQ_INIT_ATTR_TM)) {
    // Tag matching is a vendor offload.
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (!(init->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !init->pd || init->pd->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  // A basic SRQ has no CQ of its own (that is XRC's); a given one is ignored.
  ibv_srq* srq = MakeSrq(init->pd, init->srq_context, &init->attr);
  if (srq && type == IBV_SRQT_XRC) {
    if (int rc = AttachXrcSrq(srq, *init)) {  // verbs_xrc.cpp
      DestroySrq(srq);
      errno = rc;
      return nullptr;
    }
  }
  return srq;
}

int ModifySrq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (!srq || !attr) return EINVAL;
  return Srq::From(srq)->Modify(*attr, mask);
}

int QuerySrq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (!srq || !attr) return EINVAL;
  Srq::From(srq)->Query(attr);
  return 0;
}

int DestroySrq(ibv_srq* srq) {
  if (!srq) return EINVAL;
  Srq* s = Srq::From(srq);
  if (s->users.load() != 0) return EBUSY;
  // No QP draws from it, so nothing raises its events any more
  // (core/async_events.h).
  s->ctx()->async_events.Retire(&s->async_events);
  if (s->xrcd) DetachXrcSrq(srq);
  s->pd()->users.fetch_sub(1);
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  g_srq_count.fetch_sub(1);
  return 0;
}

int PostSrqRecv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ibv_recv_wr* ignored;
  if (!bad_wr) bad_wr = &ignored;
  if (!srq || !wr) {
    *bad_wr = wr;
    return EINVAL;
  }
  return Srq::From(srq)->Post(wr, bad_wr);
}

int GetSrqNum(ibv_srq* srq, uint32_t* srq_num) {
  if (!srq || !srq_num) return EINVAL;
  *srq_num = Srq::From(srq)->srq_num();
  return 0;
}

}  // namespace softrdma::verbs
