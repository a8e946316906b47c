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

}  // namespace

int AttachMcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t /*lid*/) {
  if (int rc = CheckMcastArgs(ibqp, gid)) return Fail(rc);
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return Fail(EIO);
  Qp& qp = *Qp::From(ibqp);
  std::lock_guard<SpinLock> lock(qp.lock);
  McastGroups groups(engine->registry());
  // Attach answers 0 for a pair attached already; count each pair once.
  bool attached = false;
  groups.ForEachMember(gid->raw, [&](uint32_t qpn) { attached |= qpn == ibqp->qp_num; });
  if (int rc = groups.Attach(engine->me(), ibqp->qp_num, gid->raw)) return Fail(rc);
  if (!attached) ++qp.mcast_attachments;
  return 0;
}

int DetachMcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t /*lid*/) {
  if (int rc = CheckMcastArgs(ibqp, gid)) return Fail(rc);
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return Fail(EIO);
  Qp& qp = *Qp::From(ibqp);
  std::lock_guard<SpinLock> lock(qp.lock);
  if (int rc = McastGroups(engine->registry()).Detach(engine->me(), ibqp->qp_num, gid->raw))
    return Fail(rc);
  --qp.mcast_attachments;
  return 0;
}

}  // namespace softrdma::verbs
