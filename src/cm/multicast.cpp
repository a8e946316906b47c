// rdma_join_multicast(_ex) and rdma_leave_multicast on RoCE: there is no
// subnet administrator to ask, so a join succeeds locally and at once, as
// the kernel's rdma_cm does on a RoCE port. The group's GID is the address
// as RoCEv2 carries it (IPv4-mapped for IPv4); the MULTICAST_JOIN event
// gives the address handle, QPN 0xFFFFFF and Q_Key to send to the group,
// and the id's UD QP is attached to it (ibv_attach_mcast) when the event is
// read, unless the join was send-only.
#include <cerrno>
#include <cstring>

#include "cm/address.h"
#include "cm/api.h"
#include "cm/qp_setup.h"
#include "cm/service.h"

namespace softrdma::cm {
namespace {

constexpr uint32_t kMulticastQpn = 0xffffff;

int Fail(int err) {
  errno = err;
  return -1;
}

bool IsMulticastAddress(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) & 0xf0000000u) == 0xe0000000u;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  return in6->sin6_addr.s6_addr[0] == 0xff;
}

bool SameAddress(const sockaddr_storage& joined, const sockaddr* addr) {
  return memcmp(&joined, addr, SockaddrLen(addr)) == 0;
}

Membership* FindMembership(IdPrivate* id, uint64_t handle) {
  for (Membership& m : id->memberships)
    if (m.handle == handle) return &m;
  return nullptr;
}

}  // namespace

int JoinMulticast(rdma_cm_id* cm_id, const sockaddr* addr, uint16_t join_flags, void* context) {
  if (cm_id == nullptr || addr == nullptr || SockaddrLen(addr) == 0) return Fail(EINVAL);
  if (join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
      join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    return Fail(EINVAL);
  Service* service = Service::Get();
  IdPrivate* id = IdPrivate::Of(cm_id);
  {
    std::lock_guard<std::mutex> lock(service->mu);
    // As the kernel: a UD id with its address bound to the device (by
    // rdma_bind_addr on an address, or rdma_resolve_addr).
    const bool on_device = id->id.verbs != nullptr &&
                           (id->state == IdState::kIdle || id->state == IdState::kAddrResolved);
    if (!on_device || id->id.qp_type != IBV_QPT_UD || !IsMulticastAddress(addr))
      return Fail(EINVAL);
    Membership m;
    m.handle = id->next_membership_handle++;
    memcpy(&m.addr, addr, SockaddrLen(addr));
    m.join_flags = join_flags;
    m.context = context;
    Gid gid = GidOfAddress(addr);
    memcpy(m.mgid.raw, gid.data(), 16);
    id->memberships.push_back(m);

    EventPrivate* event = nullptr;
    service->Report(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0, nullptr, 0, nullptr, &event);
    event->membership = m.handle;
    rdma_ud_param& ud = event->event.param.ud;
    ud.private_data = context;
    ibv_ah_attr& ah = ud.ah_attr;
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.dgid = m.mgid;
    ah.grh.sgid_index = uint8_t(id->gid_index < 0 ? 0 : id->gid_index);
    ah.grh.hop_limit = 64;
    ah.grh.traffic_class = id->tos;
    ud.qp_num = kMulticastQpn;
    ud.qkey = id->qkey != 0 ? id->qkey : RDMA_UDP_QKEY;
    PushEvent(id->channel, event);
  }
  return WaitForEvent(id);
}

int JoinMulticastEx(rdma_cm_id* cm_id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (attr == nullptr) return Fail(EINVAL);
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) return Fail(ENOTSUP);
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
      !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
    return Fail(EINVAL);
  return JoinMulticast(cm_id, attr->addr, static_cast<uint16_t>(attr->join_flags), context);
}

void DeliverMulticastJoin(EventPrivate* event) {
  if (event->event.event != RDMA_CM_EVENT_MULTICAST_JOIN || event->owner == nullptr) return;
  Service* service = Service::Get();
  IdPrivate* id = event->owner;
  std::lock_guard<std::mutex> lock(service->mu);
  Membership* m = FindMembership(id, event->membership);
  if (m == nullptr || id->id.qp == nullptr ||
      m->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    return;
  if (int rc = ibv_attach_mcast(id->id.qp, &m->mgid, 0)) {
    event->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
    event->event.status = -rc;
  }
}

int LeaveMulticast(rdma_cm_id* cm_id, const sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr || SockaddrLen(addr) == 0) return Fail(EINVAL);
  Service* service = Service::Get();
  IdPrivate* id = IdPrivate::Of(cm_id);
  std::lock_guard<std::mutex> lock(service->mu);
  for (auto it = id->memberships.begin(); it != id->memberships.end(); ++it) {
    if (!SameAddress(it->addr, addr)) continue;
    // Detaching a QP that never attached (its join event unread, or the
    // QP created later) fails harmlessly, as it does in librdmacm.
    if (id->id.qp != nullptr && it->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
      ibv_detach_mcast(id->id.qp, &it->mgid, 0);
    id->memberships.erase(it);
    return 0;
  }
  return Fail(EADDRNOTAVAIL);
}

}  // namespace softrdma::cm
