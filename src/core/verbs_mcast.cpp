// UD multicast: ibv_attach_mcast / ibv_detach_mcast. Membership is host-wide
// (host/mcast_groups.h); a send to QPN 0xFFFFFF and a multicast GID reaches
// every attached QP (transport/datagram.cpp).
#include <cerrno>
#include <mutex>

#include "core/qp.h"
#include "core/verbs.h"
#include "host/mcast_groups.h"
#include "transport/engine.h"

namespace softrdma::verbs {

namespace {

// The checks ib_attach_mcast makes: a multicast GID and a UD QP. The LID
// names the group on InfiniBand only; on RoCE (our link layer) it is
// ignored, as the kernel ignores it.
int CheckMcastArgs(ibv_qp* ibqp, const ibv_gid* gid) {
  if (!ibqp || !gid) return EINVAL;
  if (!IsMulticastGid(gid->raw) || Qp::From(ibqp)->type != IBV_QPT_UD) return EINVAL;
  return 0;
}

int Fail(int err) {
  errno = err;
  return err;
}

// The part attach and detach share: the checks, then `op(groups, engine,
// qp)` under the QP's lock (which guards qp.mcast_attachments).
template <typename Op>
int UnderQpLock(ibv_qp* ibqp, const ibv_gid* gid, Op op) {
  if (int rc = CheckMcastArgs(ibqp, gid)) return Fail(rc);
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return Fail(EIO);
  Qp& qp = *Qp::From(ibqp);
  std::lock_guard<SpinLock> lock(qp.lock);
  McastGroups groups(engine->registry());
  if (int rc = op(groups, engine->me(), qp)) return Fail(rc);
  return 0;
}

}  // namespace

int AttachMcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t /*lid*/) {
  return UnderQpLock(ibqp, gid, [&](McastGroups& groups, ProcRef me, Qp& qp) {
    bool added = false;
    int rc = groups.Attach(me, ibqp->qp_num, gid->raw, &added);
    if (added) ++qp.mcast_attachments;  // a pair attached twice counts once
    return rc;
  });
}

int DetachMcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t /*lid*/) {
  return UnderQpLock(ibqp, gid, [&](McastGroups& groups, ProcRef me, Qp& qp) {
    int rc = groups.Detach(me, ibqp->qp_num, gid->raw);
    if (rc == 0) --qp.mcast_attachments;
    return rc;
  });
}

}  // namespace softrdma::verbs
