// Memory-window verbs: the context ops alloc_mw, dealloc_mw and bind_mw
// (ibv_bind_mw, type 1). Type 2 windows are bound with IBV_WR_BIND_MW.
#include <cerrno>
#include <new>

#include "core/mw.h"
#include "core/objects.h"
#include "core/verbs.h"
#include "transport/engine.h"

namespace softrdma::verbs {

ibv_mw* AllocMw(ibv_pd* ibpd, ibv_mw_type type) {
  if (!ibpd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
    errno = EINVAL;
    return nullptr;
  }
  Engine* engine = Engine::Get(nullptr);
  auto* mw = new (std::nothrow) Mw();
  if (!engine || !mw) {
    delete mw;
    errno = ENOMEM;
    return nullptr;
  }
  Pd* pd = Pd::From(ibpd);
  if (int rc = engine->mr_table().AddWindow(pd->id, type, &mw->mw.rkey)) {
    delete mw;
    errno = rc;
    return nullptr;
  }
  mw->mw.context = ibpd->context;
  mw->mw.pd = ibpd;
  mw->mw.type = type;
  mw->mw.handle = mw->mw.rkey >> 8;  // the table index: fixed, unlike the key byte
  pd->users.fetch_add(1);
  return &mw->mw;
}

int DeallocMw(ibv_mw* ibmw) {
  if (!ibmw) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EINVAL;
  // A bound window is unbound first (as rxe does): its key stops working
  // once accesses in flight are done.
  engine->mr_table().RemoveWindow(ibmw->handle << 8);
  Pd::From(ibmw->pd)->users.fetch_sub(1);
  delete Mw::From(ibmw);
  return 0;
}

int BindMw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (!qp || !mw || !bind) return EINVAL;
  // A type 1 window is never zero-based (mlx5 refuses it here the same way;
  // type 2 windows may be, bound by IBV_WR_BIND_MW).
  if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  // The bind is a send WR like any other (ordered in the SQ, completes with
  // IBV_WC_BIND_MW); the new rkey is the window's with the next key byte
  // (ibv_bind_mw(3): returned in mw->rkey once posted).
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = bind->bind_info;
  ibv_send_wr* bad = nullptr;
  int rc = qp->context->ops.post_send(qp, &wr, &bad);
  if (rc == 0) mw->rkey = wr.bind_mw.rkey;
  return rc;
}

}  // namespace softrdma::verbs
