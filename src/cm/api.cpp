#include "cm/api.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cm/address.h"
#include "cm/connection.h"
#include "cm/qp_setup.h"
#include "cm/service.h"

namespace softrdma::cm {
namespace {

int Fail(int err) {
  errno = err;
  return -1;
}

bool ValidPortSpace(rdma_port_space ps) {
  return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

void ReleaseCqs(IdPrivate* id) {
  if (!id->own_cqs) return;
  if (id->id.send_cq != nullptr && id->id.send_cq != id->id.recv_cq) {
    ibv_destroy_cq(id->id.send_cq);
  }
  if (id->id.recv_cq != nullptr) ibv_destroy_cq(id->id.recv_cq);
  if (id->id.send_cq_channel != nullptr && id->id.send_cq_channel != id->id.recv_cq_channel) {
    ibv_destroy_comp_channel(id->id.send_cq_channel);
  }
  if (id->id.recv_cq_channel != nullptr) ibv_destroy_comp_channel(id->id.recv_cq_channel);
  id->id.send_cq = id->id.recv_cq = nullptr;
  id->id.send_cq_channel = id->id.recv_cq_channel = nullptr;
  id->own_cqs = false;
}

// rdma_create_qp's CQs when the application names none: one completion
// channel and CQ per direction, sized by the queue (librdmacm does the same).
int EnsureCqs(IdPrivate* id, int send_size, int recv_size, bool need_send, bool need_recv) {
  if ((!need_send || id->id.send_cq != nullptr) && (!need_recv || id->id.recv_cq != nullptr)) {
    return 0;
  }
  ibv_context* verbs = id->id.verbs;
  if (need_recv && id->id.recv_cq == nullptr) {
    id->id.recv_cq_channel = ibv_create_comp_channel(verbs);
    if (id->id.recv_cq_channel == nullptr) return -1;
    id->id.recv_cq =
        ibv_create_cq(verbs, std::max(recv_size, 1), &id->id, id->id.recv_cq_channel, 0);
    id->own_cqs = true;
    if (id->id.recv_cq == nullptr) return -1;
  }
  if (need_send && id->id.send_cq == nullptr) {
    id->id.send_cq_channel = ibv_create_comp_channel(verbs);
    if (id->id.send_cq_channel == nullptr) return -1;
    id->id.send_cq =
        ibv_create_cq(verbs, std::max(send_size, 1), &id->id, id->id.send_cq_channel, 0);
    id->own_cqs = true;
    if (id->id.send_cq == nullptr) return -1;
  }
  return 0;
}

ibv_pd* PdFor(Service* service, IdPrivate* id, ibv_pd* pd) {
  if (pd != nullptr) return pd;
  if (id->id.pd != nullptr) return id->id.pd;
  return service->DefaultPd(id->id.verbs);
}

}  // namespace

// A synchronous id's call waits for its event (librdmacm's behaviour for ids
// created without a channel): the event stays in id->event for the
// application to read, a failed one turns into errno.
int WaitForEvent(IdPrivate* id) {
  if (!id->sync) return 0;
  if (id->id.event != nullptr) {
    AckCmEvent(id->id.event);
    id->id.event = nullptr;
  }
  EventPrivate* event = PopEvent(id->channel);
  if (event == nullptr) return -1;
  DeliverMulticastJoin(event);
  id->id.event = &event->event;
  int status = event->event.status;
  if (status == 0) return 0;
  if (event->event.event == RDMA_CM_EVENT_REJECTED) return Fail(ECONNREFUSED);
  return Fail(status < 0 ? -status : status);
}

rdma_event_channel* CreateEventChannel() {
  if (Service::Get() == nullptr) return nullptr;
  ChannelPrivate* channel = CreateChannel();
  return channel != nullptr ? &channel->channel : nullptr;
}

void DestroyEventChannel(rdma_event_channel* channel) {
  if (channel != nullptr) DestroyChannel(ChannelPrivate::Of(channel));
}

int CreateId(rdma_event_channel* channel, rdma_cm_id** id_out, void* context, rdma_port_space ps) {
  if (id_out == nullptr || !ValidPortSpace(ps)) return Fail(EINVAL);
  Service* service = Service::Get();
  if (service == nullptr) return -1;
  auto* id = new IdPrivate;
  if (channel == nullptr) {
    id->channel = CreateChannel();
    if (id->channel == nullptr) {
      delete id;
      return -1;
    }
    id->sync = true;
  } else {
    id->channel = ChannelPrivate::Of(channel);
  }
  id->id.channel = &id->channel->channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
  id->id.route.path_rec = nullptr;
  {
    std::lock_guard<std::mutex> lock(service->mu);
    service->Register(id);
  }
  *id_out = &id->id;
  return 0;
}

int DestroyId(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  IdPrivate* id = IdPrivate::Of(cm_id);
  {
    std::lock_guard<std::mutex> lock(service->mu);
    AbandonConnection(service, id);
    service->Forget(id);
    DisownEvents(id->channel, id);
  }
  if (id->id.event != nullptr) AckCmEvent(id->id.event);
  // rdma_get_cm_event(3): destroying an id blocks until its events are
  // acknowledged (another thread may still be handling one).
  WaitForAcks(id);
  if (id->sync) DestroyChannel(id->channel);
  delete id;
  return 0;
}

int BindAddr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr) return Fail(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return Fail(EAFNOSUPPORT);
  Service* service = Service::Get();
  IdPrivate* id = IdPrivate::Of(cm_id);
  std::lock_guard<std::mutex> lock(service->mu);
  if (id->bound() || id->state != IdState::kIdle) return Fail(EINVAL);
  if (!IsAnyAddress(addr) && !IsLocalAddress(addr)) return Fail(EADDRNOTAVAIL);
  Status status = service->BindPort(id, PortOf(addr));
  if (!status.ok()) return Fail(status.code());
  std::memset(&id->id.route.addr.src_storage, 0, sizeof(id->id.route.addr.src_storage));
  std::memcpy(&id->id.route.addr.src_storage, addr, SockaddrLen(addr));
  SetPort(&id->id.route.addr.src_addr, id->port->port());
  if (!IsAnyAddress(addr)) {
    // A specific address binds the id to the device that owns it.
    Gid gid = RoceGidOf(addr);
    service->AssignDevice(id);
    id->gid_index = FindGidIndex(id->id.verbs, gid);
    std::memcpy(id->id.route.addr.addr.ibaddr.sgid.raw, gid.data(), 16);
    id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
  }
  return 0;
}

int ResolveAddr(rdma_cm_id* cm_id, sockaddr* src, sockaddr* dst, int /*timeout_ms*/) {
  if (cm_id == nullptr || dst == nullptr) return Fail(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return Fail(EAFNOSUPPORT);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  if (src != nullptr && !id->bound()) {
    if (BindAddr(cm_id, src) != 0) return -1;
  }
  {
    std::lock_guard<std::mutex> lock(service->mu);
    if (id->state != IdState::kIdle) return Fail(EINVAL);
    std::memset(&id->id.route.addr.dst_storage, 0, sizeof(id->id.route.addr.dst_storage));
    std::memcpy(&id->id.route.addr.dst_storage, dst, SockaddrLen(dst));

    // The source address: the bound one, else the one the routing table
    // picks for the destination (ib-cm.md §8).
    sockaddr_storage chosen{};
    int error = 0;
    if (id->bound() && !IsAnyAddress(&id->id.route.addr.src_addr)) {
      std::memcpy(&chosen, &id->id.route.addr.src_storage, sizeof(chosen));
    } else {
      Status route = RouteSource(dst, &chosen);
      if (!route.ok()) error = route.code();
    }
    Gid sgid{};
    int gid_index = -1;
    if (error == 0) {
      sgid = RoceGidOf(reinterpret_cast<sockaddr*>(&chosen));
      gid_index = FindGidIndex(service->devices[0], sgid);
      if (gid_index < 0) error = ENODEV;  // no RoCE GID for that address
    }
    if (error == 0 && !id->bound()) {
      Status status = service->BindPort(id, 0);
      if (!status.ok()) error = status.code();
    }
    if (error != 0) {
      service->Report(id, RDMA_CM_EVENT_ADDR_ERROR, -error);
    } else {
      uint16_t port = id->port->port();
      std::memcpy(&id->id.route.addr.src_storage, &chosen, sizeof(chosen));
      SetPort(&id->id.route.addr.src_addr, port);
      service->AssignDevice(id);
      id->gid_index = gid_index;
      id->remote_gid = RoceGidOf(dst);
      std::memcpy(id->id.route.addr.addr.ibaddr.sgid.raw, sgid.data(), 16);
      std::memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, id->remote_gid.data(), 16);
      id->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
      id->state = IdState::kAddrResolved;
      service->Report(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
  }
  return WaitForEvent(id);
}

int ResolveRoute(rdma_cm_id* cm_id, int /*timeout_ms*/) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  {
    std::lock_guard<std::mutex> lock(service->mu);
    if (id->state != IdState::kAddrResolved) return Fail(EINVAL);
    // RoCE has no SA: the path is built from local data (ib-cm.md §8).
    ibv_port_attr port_attr{};
    ibv_query_port(id->id.verbs, 1, &port_attr);
    ibv_sa_path_rec& path = id->path;
    std::memset(&path, 0, sizeof(path));
    std::memcpy(path.sgid.raw, id->id.route.addr.addr.ibaddr.sgid.raw, 16);
    std::memcpy(path.dgid.raw, id->id.route.addr.addr.ibaddr.dgid.raw, 16);
    path.pkey = htons(0xffff);
    path.hop_limit = 64;
    path.traffic_class = id->tos;
    path.reversible = 1;
    path.numb_path = 1;
    path.mtu_selector = 2;  // exactly
    path.mtu = uint8_t(port_attr.active_mtu);
    path.rate_selector = 2;
    path.rate = 0;
    path.packet_life_time_selector = 2;
    path.packet_life_time = id->ack_timeout_set && id->ack_timeout > 0 ? id->ack_timeout - 1 : 16;
    uint32_t sport = PortOf(&id->id.route.addr.src_addr);
    uint32_t dport = PortOf(&id->id.route.addr.dst_addr);
    path.flow_label = htonl((sport * 31 + dport) & 0xfffff);
    id->path_mtu = path.mtu;
    id->id.route.path_rec = &id->path;
    id->id.route.num_paths = 1;
    id->state = IdState::kRouteResolved;
    service->Report(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  }
  return WaitForEvent(id);
}

int Listen(rdma_cm_id* cm_id, int backlog) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  if (!id->bound()) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (BindAddr(cm_id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
  }
  std::lock_guard<std::mutex> lock(service->mu);
  if (id->state != IdState::kIdle && id->state != IdState::kListen) return Fail(EINVAL);
  id->state = IdState::kListen;
  id->backlog = backlog > 0 ? backlog : 1024;
  // Requests from other hosts come through QP1; a listener on a loopback
  // address can get none (and so opens no UDP port).
  if (!IsLoopbackAddress(&id->id.route.addr.src_addr)) service->ReadQp1();
  return 0;
}

int Connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  {
    std::lock_guard<std::mutex> lock(service->mu);
    if (int err = StartConnect(service, id, param); err != 0) return Fail(err);
  }
  return WaitForEvent(id);
}

int AcceptConnection(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  bool wait;
  {
    std::lock_guard<std::mutex> lock(service->mu);
    wait = id->id.qp_type != IBV_QPT_UD;
    if (int err = Accept(service, id, param); err != 0) return Fail(err);
  }
  return wait ? WaitForEvent(id) : 0;
}

int RejectConnection(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  if (int err = Reject(service, IdPrivate::Of(cm_id), private_data, len); err != 0) {
    return Fail(err);
  }
  return 0;
}

int DisconnectId(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  bool wait = false;
  {
    std::lock_guard<std::mutex> lock(service->mu);
    // A synchronous id waits for its DISCONNECTED, unless it was already
    // reported (the peer disconnected first and the event is queued).
    wait = id->state == IdState::kEstablished || id->state == IdState::kDreqRcvd;
    if (int err = Disconnect(service, id); err != 0) return Fail(err);
  }
  return wait ? WaitForEvent(id) : 0;
}

int EstablishId(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  if (int err = Establish(service, IdPrivate::Of(cm_id)); err != 0) return Fail(err);
  return 0;
}

int Notify(rdma_cm_id* cm_id, ibv_event_type event) {
  if (cm_id == nullptr) return Fail(EINVAL);
  if (event != IBV_EVENT_COMM_EST) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  return NotifyEstablished(service, IdPrivate::Of(cm_id)) == 0 ? 0 : -1;
}

int GetCmEvent(rdma_event_channel* channel, rdma_cm_event** event_out) {
  if (channel == nullptr || event_out == nullptr) return Fail(EINVAL);
  EventPrivate* event = PopEvent(ChannelPrivate::Of(channel));
  if (event == nullptr) return -1;
  DeliverMulticastJoin(event);
  if (event->event.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    // The listener's backlog counts requests not yet read.
    Service* service = Service::Get();
    std::lock_guard<std::mutex> lock(service->mu);
    IdPrivate* child = event->owner;
    if (child != nullptr && child->listener != nullptr) {
      child->listener->pending_requests--;
      child->listener = nullptr;
    }
  }
  *event_out = &event->event;
  return 0;
}

int AckCmEvent(rdma_cm_event* event) {
  if (event == nullptr) return Fail(EINVAL);
  AckEvent(reinterpret_cast<EventPrivate*>(event));
  return 0;
}

int MigrateId(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  ChannelPrivate* target = nullptr;
  if (channel == nullptr) {
    target = CreateChannel();
    if (target == nullptr) return -1;
  } else {
    target = ChannelPrivate::Of(channel);
  }
  ChannelPrivate* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(service->mu);
    if (id->sync)
      old = id->channel;
    else
      DisownEvents(id->channel, id);
    id->channel = target;
    id->id.channel = &target->channel;
    id->sync = channel == nullptr;
  }
  if (old != nullptr) DestroyChannel(old);
  return 0;
}

int SetOption(rdma_cm_id* cm_id, int level, int optname, void* optval, size_t optlen) {
  if (cm_id == nullptr || optval == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return Fail(EINVAL);
        id->tos = *static_cast<uint8_t*>(optval);
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY:
        // Ports are exclusive per port space here whatever the address
        // (docs/abi.md): both options are accepted and change nothing.
        if (optlen != sizeof(int)) return Fail(EINVAL);
        return 0;
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) return Fail(EINVAL);
        id->ack_timeout = std::min<uint8_t>(*static_cast<uint8_t*>(optval), 31);
        id->ack_timeout_set = true;
        return 0;
      default:
        return Fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
    // Path records come from the SA on InfiniBand; RoCE builds its own.
    return Fail(EOPNOTSUPP);
  }
  return Fail(ENOSYS);
}

int InitQpAttr(rdma_cm_id* cm_id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (cm_id == nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  return softrdma::cm::InitQpAttr(IdPrivate::Of(cm_id), qp_attr, qp_attr_mask);
}

int CreateQp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  ibv_qp_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, attr, sizeof(*attr));
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd;
  if (CreateQpEx(cm_id, &attr_ex) != 0) return -1;
  std::memcpy(attr, &attr_ex, sizeof(*attr));  // the caps and CQs chosen
  return 0;
}

int CreateQpEx(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  if (id->id.verbs == nullptr || id->id.qp != nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  ibv_pd* given = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : nullptr;
  ibv_pd* pd = PdFor(service, id, given);
  if (pd == nullptr) return -1;
  if (pd->context != id->id.verbs) return Fail(EINVAL);
  attr->pd = pd;
  attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  bool is_xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV;
  if (!is_xrc_recv) {
    bool need_recv =
        attr->srq == nullptr && id->id.srq == nullptr && attr->qp_type != IBV_QPT_XRC_SEND;
    if (EnsureCqs(id, int(attr->cap.max_send_wr), int(attr->cap.max_recv_wr),
                  attr->send_cq == nullptr, attr->recv_cq == nullptr && need_recv) != 0) {
      int err = errno;
      ReleaseCqs(id);
      return Fail(err != 0 ? err : ENOMEM);
    }
    if (attr->send_cq == nullptr) attr->send_cq = id->id.send_cq;
    if (attr->recv_cq == nullptr) attr->recv_cq = id->id.recv_cq;
    if (attr->srq == nullptr) attr->srq = id->id.srq;
  }
  if (is_xrc_recv && !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) {
    // An XRC target belongs to a domain, not to a PD (librdmacm's own).
    attr->xrcd = service->DefaultXrcd(id->id.verbs);
    if (attr->xrcd == nullptr) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }
  if (is_xrc_recv) attr->comp_mask &= ~uint32_t(IBV_QP_INIT_ATTR_PD);
  ibv_qp* qp = ibv_create_qp_ex(id->id.verbs, attr);
  if (qp == nullptr) {
    int err = errno;
    ReleaseCqs(id);
    return Fail(err);
  }
  id->id.qp = qp;
  // id->id.qp_type stays what the id was created with (rdma_create_id's port
  // space, rdma_create_ep's ai_qp_type), as in librdmacm 44: it decides the
  // connection's transport in the REQ, and the QP may differ (libfabric
  // attaches an XRC initiator QP to an RDMA_PS_TCP id and connects it as RC).
  id->id.pd = qp->pd;  // as librdmacm: the id's PD is its QP's from now on
  if (int err = PrepareNewQp(id); err != 0) {
    ibv_destroy_qp(qp);
    id->id.qp = nullptr;
    ReleaseCqs(id);
    return Fail(err);
  }
  return 0;
}

void DestroyQp(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return;
  IdPrivate* id = IdPrivate::Of(cm_id);
  if (id->id.qp != nullptr) ibv_destroy_qp(id->id.qp);
  id->id.qp = nullptr;
  ReleaseCqs(id);
}

int GetRequest(rdma_cm_id* listen, rdma_cm_id** id_out) {
  if (listen == nullptr || id_out == nullptr) return Fail(EINVAL);
  IdPrivate* listener = IdPrivate::Of(listen);
  if (!listener->sync) return Fail(EINVAL);
  if (listener->id.event != nullptr) {
    AckCmEvent(listener->id.event);
    listener->id.event = nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (GetCmEvent(listen->channel, &event) != 0) return -1;
  if (event->status != 0 || event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    int err = event->status < 0 ? -event->status : EINVAL;
    AckCmEvent(event);
    return Fail(err);
  }
  rdma_cm_id* child = event->id;
  if (listener->has_ep_qp_attr) {
    ibv_qp_init_attr attr = listener->ep_qp_attr;
    if (CreateQp(child, listener->ep_pd, &attr) != 0) {
      int err = errno;
      RejectConnection(child, nullptr, 0);
      AckCmEvent(event);
      DestroyId(child);
      return Fail(err);
    }
  }
  child->event = event;
  *id_out = child;
  return 0;
}

int CreateEp(rdma_cm_id** id_out, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id_out == nullptr || res == nullptr) return Fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  rdma_port_space ps = res->ai_port_space != 0
                           ? rdma_port_space(res->ai_port_space)
                           : (res->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
  if (CreateId(nullptr, &cm_id, nullptr, ps) != 0) return -1;
  IdPrivate* id = IdPrivate::Of(cm_id);
  if (res->ai_qp_type != 0) id->id.qp_type = ibv_qp_type(res->ai_qp_type);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = res->ai_src_addr != nullptr ? BindAddr(cm_id, res->ai_src_addr) : 0;
    if (rc == 0 && qp_init_attr != nullptr) {
      qp_init_attr->qp_type = id->id.qp_type;  // the endpoint's type (rdma_create_ep(3))
      id->has_ep_qp_attr = true;
      id->ep_qp_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
  } else {
    rc = ResolveAddr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (rc == 0) rc = ResolveRoute(cm_id, 2000);
    if (rc == 0 && pd != nullptr) id->id.pd = pd;
    if (rc == 0 && qp_init_attr != nullptr) {
      qp_init_attr->qp_type = id->id.qp_type;
      rc = CreateQp(cm_id, pd, qp_init_attr);
    }
  }
  if (rc != 0) {
    int err = errno;
    DestroyId(cm_id);
    return Fail(err);
  }
  *id_out = cm_id;
  return 0;
}

void DestroyEp(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return;
  DestroyQp(cm_id);
  DestroySrq(cm_id);
  DestroyId(cm_id);
}

int CreateSrq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  ibv_srq_init_attr_ex attr_ex{};
  attr_ex.srq_context = attr->srq_context;
  attr_ex.attr = attr->attr;
  attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  // On an XRC id the SRQ is an XRC SRQ (as librdmacm makes it).
  attr_ex.srq_type = cm_id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  attr_ex.pd = pd;
  if (CreateSrqEx(cm_id, &attr_ex) != 0) return -1;
  attr->attr = attr_ex.attr;
  return 0;
}

int CreateSrqEx(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  if (id->id.verbs == nullptr || id->id.srq != nullptr) return Fail(EINVAL);
  Service* service = Service::Get();
  std::lock_guard<std::mutex> lock(service->mu);
  ibv_pd* given = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : nullptr;
  attr->pd = PdFor(service, id, given);
  if (attr->pd == nullptr) return -1;
  attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
    attr->srq_type = IBV_SRQT_BASIC;
  }
  if (attr->srq_type == IBV_SRQT_XRC && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD)) {
    attr->xrcd = service->DefaultXrcd(id->id.verbs);
    if (attr->xrcd == nullptr) return -1;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
  }
  if (attr->srq_type == IBV_SRQT_XRC && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ)) {
    // An XRC SRQ completes into a CQ of its own.
    if (EnsureCqs(id, 1, int(attr->attr.max_wr), false, true) != 0) return -1;
    attr->cq = id->id.recv_cq;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->id.verbs, attr);
  if (srq == nullptr) return -1;
  id->id.srq = srq;
  if (id->id.pd == nullptr) id->id.pd = attr->pd;
  return 0;
}

int DestroySrq(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return Fail(EINVAL);
  IdPrivate* id = IdPrivate::Of(cm_id);
  if (id->id.srq == nullptr) return 0;
  int rc = ibv_destroy_srq(id->id.srq);
  if (rc != 0) return Fail(rc);
  id->id.srq = nullptr;
  if (id->id.qp == nullptr) ReleaseCqs(id);
  return 0;
}

ibv_context** GetDevices(int* num_devices) {
  Service* service = Service::Get();
  if (service == nullptr) {
    if (num_devices != nullptr) *num_devices = 0;
    return nullptr;
  }
  size_t n = service->devices.size();
  auto** list = static_cast<ibv_context**>(std::calloc(n + 1, sizeof(ibv_context*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < n; ++i) list[i] = service->devices[i];
  if (num_devices != nullptr) *num_devices = int(n);
  return list;
}

void FreeDevices(ibv_context** list) {
  std::free(list);
}

__be16 GetSrcPort(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return 0;
  return htons(PortOf(&cm_id->route.addr.src_addr));
}

__be16 GetDstPort(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return 0;
  return htons(PortOf(&cm_id->route.addr.dst_addr));
}

namespace {

// A copy of `len` bytes of `addr` in a sockaddr_storage (freed by
// FreeAddrInfo); nullptr when out of memory.
sockaddr* CopyAddress(const sockaddr* addr, socklen_t len) {
  auto* copy = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (copy != nullptr) std::memcpy(copy, addr, std::min<size_t>(len, sizeof(sockaddr_storage)));
  return copy;
}

// rdma_getaddrinfo with neither node nor service: the result is the hints
// themselves (flags, family, QP type, port space and their addresses), as
// librdmacm answers; pyverbs asks this way for a multicast group's address.
int AddrInfoFromHints(const rdma_addrinfo& hints, rdma_addrinfo** res) {
  auto* result = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (result == nullptr) return Fail(ENOMEM);
  result->ai_flags = hints.ai_flags;
  result->ai_family = hints.ai_family;
  result->ai_qp_type = hints.ai_qp_type;
  result->ai_port_space = hints.ai_port_space;
  bool ok = true;
  if (hints.ai_dst_addr != nullptr && hints.ai_dst_len > 0) {
    result->ai_dst_addr = CopyAddress(hints.ai_dst_addr, hints.ai_dst_len);
    result->ai_dst_len = hints.ai_dst_len;
    ok = result->ai_dst_addr != nullptr;
  }
  if (ok && hints.ai_src_addr != nullptr && hints.ai_src_len > 0) {
    result->ai_src_addr = CopyAddress(hints.ai_src_addr, hints.ai_src_len);
    result->ai_src_len = hints.ai_src_len;
    ok = result->ai_src_addr != nullptr;
  }
  if (!ok) {
    FreeAddrInfo(result);
    return Fail(ENOMEM);
  }
  *res = result;
  return 0;
}

}  // namespace

int GetAddrInfo(const char* node, const char* service_name, const rdma_addrinfo* hints,
                rdma_addrinfo** res) {
  if (res == nullptr) return Fail(EINVAL);
  if (node == nullptr && service_name == nullptr) {
    if (hints == nullptr) return Fail(EINVAL);
    return AddrInfoFromHints(*hints, res);
  }
  addrinfo ai_hints{};
  int flags = hints != nullptr ? hints->ai_flags : 0;
  ai_hints.ai_family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
  if (ai_hints.ai_family != AF_UNSPEC && ai_hints.ai_family != AF_INET &&
      ai_hints.ai_family != AF_INET6) {
    return Fail(EAFNOSUPPORT);  // AF_IB: no InfiniBand addressing on RoCE
  }
  ai_hints.ai_socktype = SOCK_STREAM;
  if (flags & RAI_PASSIVE) ai_hints.ai_flags |= AI_PASSIVE;
  if (flags & RAI_NUMERICHOST) ai_hints.ai_flags |= AI_NUMERICHOST;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(node, service_name, &ai_hints, &found);
  if (rc != 0) return Fail(rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL);

  auto* result = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  auto* addr = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (result == nullptr || addr == nullptr) {
    std::free(result);
    std::free(addr);
    freeaddrinfo(found);
    return Fail(ENOMEM);
  }
  std::memcpy(addr, found->ai_addr, found->ai_addrlen);
  result->ai_flags = flags;
  result->ai_family = found->ai_family;
  result->ai_qp_type = hints != nullptr && hints->ai_qp_type != 0 ? hints->ai_qp_type : IBV_QPT_RC;
  result->ai_port_space = hints != nullptr && hints->ai_port_space != 0
                              ? hints->ai_port_space
                              : (result->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);
  if (flags & RAI_PASSIVE) {
    result->ai_src_addr = addr;
    result->ai_src_len = found->ai_addrlen;
  } else {
    result->ai_dst_addr = addr;
    result->ai_dst_len = found->ai_addrlen;
    if (hints != nullptr && hints->ai_src_addr != nullptr && hints->ai_src_len > 0) {
      result->ai_src_addr = CopyAddress(hints->ai_src_addr, hints->ai_src_len);
      if (result->ai_src_addr != nullptr) result->ai_src_len = hints->ai_src_len;
    }
  }
  freeaddrinfo(found);
  *res = result;
  return 0;
}

void FreeAddrInfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

}  // namespace softrdma::cm
