#include "transport/xrc.h"

#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "core/srq.h"
#include "core/xrcd.h"
#include "host/registry.h"
#include "transport/engine.h"

namespace softrdma::transport {

namespace {

// Looked up once per message that is placed (not per fragment), so a mutex
// is cheap enough; a QP keeps its binding while it holds a WQE.
std::mutex g_mutex;
std::unordered_map<uint32_t, Srq*>& Srqs() {
  static auto* m = new std::unordered_map<uint32_t, Srq*>();  // never destroyed: used at exit
  return *m;
}
std::unordered_map<uint32_t, Qp*>& Targets() {
  static auto* m = new std::unordered_map<uint32_t, Qp*>();
  return *m;
}

}  // namespace

void RegisterXrcSrq(Srq* srq) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Srqs()[srq->srq_num()] = srq;
}

void UnregisterXrcSrq(Srq* srq) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Srqs().erase(srq->srq_num());
}

void RegisterXrcTarget(Qp* qp) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Targets()[qp->verbs()->qp_num] = qp;
}

// Handles are counted under the map's mutex, so an open cannot race with
// the destruction of the last handle.
Qp* OpenXrcTarget(uint32_t qpn, const Xrcd& xrcd) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = Targets().find(qpn);
  if (it == Targets().end() || !it->second->xrcd || !it->second->xrcd->SameDomain(xrcd))
    return nullptr;
  ++it->second->xrc_handles;
  return it->second;
}

bool ReleaseXrcTargetHandle(Qp* qp) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--qp->xrc_handles > 0) return true;
  Targets().erase(qp->verbs()->qp_num);
  return false;
}

Srq* AcquireXrcSrq(uint32_t srqn) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = Srqs().find(srqn);
  if (it == Srqs().end()) return nullptr;
  it->second->users.fetch_add(1);
  return it->second;
}

void ReleaseXrcSrq(Srq* srq) {
  srq->users.fetch_sub(1);
}

bool BindXrcSrq(Qp& qp, uint32_t srqn) {
  if (qp.srq_wqe_held) return true;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = Srqs().find(srqn);
  if (it == Srqs().end() || !qp.xrcd || !it->second->xrcd ||
      !it->second->xrcd->SameDomain(*qp.xrcd))
    return false;
  Srq* srq = it->second;
  if (qp.srq != srq) {
    if (qp.srq) qp.srq->users.fetch_sub(1);
    // Counted as a user while bound, so ibv_destroy_srq cannot free it
    // under a message being placed (EBUSY, as for any attached QP).
    srq->users.fetch_add(1);
    qp.srq = srq;
  }
  qp.recv_cq = srq->cq;
  return true;
}

void UnbindXrcSrq(Qp& qp) {
  if (!qp.srq || qp.srq_wqe_held) return;
  qp.srq->users.fetch_sub(1);
  qp.srq = nullptr;
  qp.recv_cq = nullptr;
}

int CheckXrcSendWr(const Qp& qp, const ibv_send_wr& wr) {
  if (qp.type != IBV_QPT_XRC_SEND) return 0;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return 0;
    default:
      return EOPNOTSUPP;
  }
}

void PublishXrcSrq(Engine& engine, const Srq& srq, bool destroyed) {
  PublishedQp* e = engine.registry().published_qp(srq.srq_num());
  if (!e) return;
  QpSnapshot s{};
  s.owner_slot = engine.me().slot;
  s.owner_gen = engine.me().gen;
  s.pd_id = srq.pd()->id;
  s.state = destroyed ? IBV_QPS_RESET : IBV_QPS_RTS;
  s.dest_qpn = srq.xrcd->token;
  s.type = destroyed ? 0 : kPublishedXrcSrq;
  PublishQpEntry(*e, s);
}

bool XrcRequestPd(const Registry& registry, const QpSnapshot& target, uint32_t srqn,
                  uint32_t* pd_id) {
  const PublishedQp* e = registry.published_qp(srqn);
  if (!e) return false;
  QpSnapshot srq = ReadQpEntry(*e);
  if (srq.type != kPublishedXrcSrq || srq.state != IBV_QPS_RTS ||
      srq.owner_slot != target.owner_slot || srq.owner_gen != target.owner_gen ||
      srq.dest_qpn != target.pd_id)  // the target publishes its domain's token as pd_id
    return false;
  *pd_id = srq.pd_id;
  return true;
}

}  // namespace softrdma::transport
