#include "cm/connection.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "cm/address.h"
#include "cm/qp_setup.h"
#include "util/log.h"

namespace softrdma::cm {
namespace {

// ib-cm.md §6.3 / §3: what Linux's rdma_cm puts in its messages.
constexpr uint8_t kCmResponseTimeout = 20;
constexpr uint8_t kMaxCmRetries = 15;
constexpr uint8_t kPacketLifeTime = 16;
constexpr uint8_t kTargetAckDelay = 15;
constexpr uint16_t kRejTimeout = 4;
constexpr uint16_t kRejInvalidServiceId = 8;
constexpr uint16_t kRejStaleConnection = 10;
constexpr uint16_t kRejConsumerDefined = 28;
constexpr uint8_t kSidrSuccess = 0;
constexpr uint8_t kSidrUnsupported = 1;
constexpr uint8_t kSidrReject = 2;

uint32_t RandomPsn() {
  static std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

bool IsDatagram(const IdPrivate* id) {
  return id->id.qp_type == IBV_QPT_UD;
}

uint8_t DeviceMaxResponder(Service* service) {
  return uint8_t(std::min(service->device_attr.max_qp_rd_atom, 255));
}
uint8_t DeviceMaxInitiator(Service* service) {
  return uint8_t(std::min(service->device_attr.max_qp_init_rd_atom, 255));
}

uint32_t QpnOf(IdPrivate* id, const rdma_conn_param* param) {
  if (id->id.qp != nullptr) return id->id.qp->qp_num;
  return param != nullptr ? param->qp_num & 0xffffff : 0;
}

// A transaction id for an exchange this id starts (ib-cm.md §2): unique per
// process and comm id; `exchange` tells a DREQ's (1) from the REQ's (0).
uint64_t NewTransactionId(const IdPrivate* id, uint64_t exchange) {
  return ((uint64_t(uint32_t(getpid())) << 32) | id->local_comm_id) ^ (exchange << 63);
}

// Where a connection's REQ goes: the listening port's socket if the
// destination is this host (true), else QP1 of the destination's address
// over the RoCE wire (cm/gsi_sender.h), as for every address with
// SOFTRDMA_CM_GSI=1 or SOFTRDMA_WIRE=roce.
bool LocalDestination(Service* service, IdPrivate* id, std::string* to) {
  const sockaddr* dst = &id->id.route.addr.dst_addr;
  if (!service->force_roce && IsLocalAddress(dst)) {
    *to = PortSocketName(uint16_t(id->id.ps), PortOf(dst));
    return true;
  }
  Gid local_gid;
  std::memcpy(local_gid.data(), id->id.route.addr.addr.ibaddr.sgid.raw, 16);
  *to = RemotePeerName(local_gid, id->remote_gid);
  return false;
}

void FinishRejected(Service* service, IdPrivate* id, uint16_t reason, const uint8_t* data,
                    size_t len) {
  service->Disarm(id);
  id->state = IdState::kRejected;
  QpToError(id);
  service->Report(id, RDMA_CM_EVENT_REJECTED, reason, data, len);
}

void ReportDisconnected(Service* service, IdPrivate* id, int status) {
  if (id->disconnected_reported) return;
  id->disconnected_reported = true;
  service->Report(id, RDMA_CM_EVENT_DISCONNECTED, status);
}

void SendRej(Service* service, const std::string& to, uint32_t local_comm_id,
             uint32_t remote_comm_id, uint64_t tid, CmMessageKind what, uint16_t reason,
             const void* data, size_t len) {
  RejMsg rej;
  rej.local_comm_id = local_comm_id;
  rej.remote_comm_id = remote_comm_id;
  rej.message_rejected = what;
  rej.reason = reason;
  if (reason == kRejTimeout) {
    // With "timeout" the ARI carries the rejecter's CA GUID (ib-cm.md §3.3).
    uint64_t guid = htobe64(service->node_guid);
    std::memcpy(rej.ari.data(), &guid, 8);
    rej.ari_length = 8;
  }
  if (data != nullptr)
    std::memcpy(rej.private_data.data(), data, std::min(len, kRejPrivateDataSize));
  service->SendMad(to, Mad{tid, 0, rej});
}

void SendDreq(Service* service, IdPrivate* id) {
  DreqMsg dreq;
  dreq.local_comm_id = id->local_comm_id;
  dreq.remote_comm_id = id->remote_comm_id;
  dreq.remote_qpn = id->remote_qpn;
  id->transaction_id = NewTransactionId(id, 1);
  service->SendWithRetry(id, id->peer, Mad{id->transaction_id, 0, dreq},
                         service->cm_interval_ns(true));
}

void SendDrep(Service* service, const std::string& to, uint32_t local_comm_id,
              uint32_t remote_comm_id, uint64_t tid) {
  DrepMsg drep;
  drep.local_comm_id = local_comm_id;
  drep.remote_comm_id = remote_comm_id;
  service->SendMad(to, Mad{tid, 0, drep});
}

void SendRtu(Service* service, IdPrivate* id) {
  RtuMsg rtu;
  rtu.local_comm_id = id->local_comm_id;
  rtu.remote_comm_id = id->remote_comm_id;
  service->SendMad(id->peer, Mad{id->transaction_id, 0, rtu});
}

// ---- passive side: a REQ or SIDR_REQ on a bound port ----

// The child id of a request (librdmacm: the id of a CONNECT_REQUEST event).
IdPrivate* NewChild(Service* service, IdPrivate* listener, const CmaHeader& header,
                    uint64_t service_id, const std::string& from, pid_t from_pid) {
  auto* child = new IdPrivate;
  child->id.verbs = listener->id.verbs != nullptr ? listener->id.verbs : service->devices[0];
  child->id.pd = service->DefaultPd(child->id.verbs);  // as AssignDevice
  child->id.context = listener->id.context;
  child->id.ps = listener->id.ps;
  child->id.qp_type = listener->id.qp_type;
  child->id.port_num = 1;
  child->id.route.path_rec = &child->path;
  child->id.route.num_paths = 1;
  if (listener->sync) {
    child->channel = CreateChannel();
    child->sync = true;
  } else {
    child->channel = listener->channel;
  }
  child->id.channel = &child->channel->channel;
  child->listener = listener;
  child->listener_side = true;
  child->tos = listener->tos;
  child->ack_timeout_set = listener->ack_timeout_set;
  child->ack_timeout = listener->ack_timeout;
  AddressOfCmaIp(header.ip_version, header.dst_ip, PortOfServiceId(service_id),
                 &child->id.route.addr.src_storage);
  AddressOfCmaIp(header.ip_version, header.src_ip, header.src_port,
                 &child->id.route.addr.dst_storage);
  Gid sgid = RoceGidOf(&child->id.route.addr.src_addr);
  child->remote_gid = RoceGidOf(&child->id.route.addr.dst_addr);
  std::memcpy(child->id.route.addr.addr.ibaddr.sgid.raw, sgid.data(), 16);
  std::memcpy(child->id.route.addr.addr.ibaddr.dgid.raw, child->remote_gid.data(), 16);
  child->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
  child->gid_index = FindGidIndex(child->id.verbs, sgid);
  child->peer = from;
  service->Register(child);
  service->WatchPeer(child, from_pid);
  return child;
}

// Whether the listener takes a request for the header's destination.
bool ListenerMatches(IdPrivate* listener, const CmaHeader& header) {
  const sockaddr* bound = &listener->id.route.addr.src_addr;
  if (IsAnyAddress(bound)) return true;
  sockaddr_storage dst;
  AddressOfCmaIp(header.ip_version, header.dst_ip, 0, &dst);
  return SameIp(bound, reinterpret_cast<sockaddr*>(&dst));
}

void OnReq(Service* service, const Mad& mad, const ReqMsg& req, const std::string& from,
           pid_t from_pid, IdPrivate* port_owner) {
  // A retransmitted REQ of a connection we already have (ib-cm.md §6.3):
  // ignored while the application decides or our REP (resent by its own
  // timer) is on its way; after the connection ended, REJ "stale connection".
  if (IdPrivate* existing = service->FindByRemote(from, req.local_comm_id)) {
    if (existing->state == IdState::kTimewait) {
      SendRej(service, from, existing->local_comm_id, req.local_comm_id, mad.transaction_id,
              CmMessageKind::kReq, kRejStaleConnection, nullptr, 0);
    }
    return;
  }
  if (port_owner->state != IdState::kListen || IsDatagram(port_owner)) {
    SendRej(service, from, 0, req.local_comm_id, mad.transaction_id, CmMessageKind::kReq,
            kRejInvalidServiceId, nullptr, 0);
    return;
  }
  std::optional<CmaHeader> header =
      DecodeCmaHeader(std::span<const uint8_t>(req.private_data.data(), kCmaHeaderSize));
  bool xrc_listener = port_owner->id.qp_type == IBV_QPT_XRC_RECV;
  bool transport_ok =
      xrc_listener ? req.transport == CmTransport::kXrc : req.transport != CmTransport::kXrc;
  if (!header || !ListenerMatches(port_owner, *header) || !transport_ok ||
      port_owner->pending_requests >= std::max(port_owner->backlog, 1)) {
    // The listener refuses (ib-cm.md §5.1): consumer-defined, no data.
    SendRej(service, from, 0, req.local_comm_id, mad.transaction_id, CmMessageKind::kReq,
            kRejConsumerDefined, nullptr, 0);
    return;
  }
  IdPrivate* child = NewChild(service, port_owner, *header, req.service_id, from, from_pid);
  service->AssignCommId(child);
  child->state = IdState::kReqRcvd;
  child->remote_comm_id = req.local_comm_id;
  child->transaction_id = mad.transaction_id;
  child->remote_qpn = req.local_qpn;
  child->sq_psn = req.starting_psn;
  child->rq_psn = RandomPsn();
  child->path_mtu = req.path_mtu;
  child->retry_count = req.retry_count;
  child->rnr_retry_count = req.rnr_retry_count;
  child->local_ack_timeout = req.primary_local_ack_timeout;
  child->flow_control = req.flow_control;
  child->remote_gid = req.primary_local_gid;
  std::memcpy(child->id.route.addr.addr.ibaddr.dgid.raw, req.primary_local_gid.data(), 16);
  // Seen from the passive side: what the active side will send is what we
  // must absorb (ib-cm.md §4).
  child->responder_resources = req.initiator_depth;
  child->initiator_depth = req.responder_resources;
  child->path.hop_limit = req.primary_hop_limit;
  child->path.mtu = req.path_mtu;
  child->path.pkey = htons(0xffff);
  child->path.packet_life_time = kPacketLifeTime;
  std::memcpy(child->path.sgid.raw, child->id.route.addr.addr.ibaddr.sgid.raw, 16);
  std::memcpy(child->path.dgid.raw, req.primary_local_gid.data(), 16);
  port_owner->pending_requests++;

  EventPrivate* event = nullptr;
  service->Report(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, req.private_data.data() + kCmaHeaderSize,
                  kReqUserDataMax, port_owner, &event);
  rdma_conn_param& conn = event->event.param.conn;
  conn.responder_resources = req.initiator_depth;
  conn.initiator_depth = req.responder_resources;
  conn.flow_control = req.flow_control;
  conn.retry_count = req.retry_count;
  conn.rnr_retry_count = req.rnr_retry_count;
  conn.srq = req.srq;
  conn.qp_num = req.local_qpn;
  PushEvent(port_owner->channel, event);
}

void OnSidrReq(Service* service, const Mad& mad, const SidrReqMsg& req, const std::string& from,
               pid_t from_pid, IdPrivate* port_owner) {
  auto answer = [&](uint8_t status) {
    SidrRepMsg rep;
    rep.request_id = req.request_id;
    rep.status = status;
    rep.service_id = req.service_id;
    service->SendMad(from, Mad{mad.transaction_id, 0, rep});
  };
  if (service->FindByRemote(from, req.request_id) != nullptr) return;  // a retransmission
  if (port_owner->state != IdState::kListen || !IsDatagram(port_owner)) {
    answer(kSidrUnsupported);
    return;
  }
  std::optional<CmaHeader> header =
      DecodeCmaHeader(std::span<const uint8_t>(req.private_data.data(), kCmaHeaderSize));
  if (!header || !ListenerMatches(port_owner, *header) ||
      port_owner->pending_requests >= std::max(port_owner->backlog, 1)) {
    answer(kSidrReject);
    return;
  }
  IdPrivate* child = NewChild(service, port_owner, *header, req.service_id, from, from_pid);
  child->state = IdState::kSidrReqRcvd;
  child->remote_comm_id = req.request_id;
  child->transaction_id = mad.transaction_id;
  port_owner->pending_requests++;
  EventPrivate* event = nullptr;
  service->Report(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, req.private_data.data() + kCmaHeaderSize,
                  kSidrReqUserDataMax, port_owner, &event);
  PushEvent(port_owner->channel, event);
}

// ---- active side: answers to our REQ / SIDR_REQ ----

void OnRep(Service* service, const Mad& mad, const RepMsg& rep, IdPrivate* id, pid_t from_pid,
           const std::string& from) {
  if (id->state == IdState::kEstablished || id->state == IdState::kRepRcvd) {
    if (id->state == IdState::kEstablished) SendRtu(service, id);  // our RTU was lost
    return;
  }
  if (id->state != IdState::kReqSent) {
    service->counters.mads_dropped++;
    return;
  }
  service->Disarm(id);
  id->peer = from;
  service->WatchPeer(id, from_pid);
  id->remote_comm_id = rep.local_comm_id;
  id->remote_qpn = rep.local_qpn;
  id->sq_psn = rep.starting_psn;
  id->rnr_retry_count = rep.rnr_retry_count;
  // ib-cm.md §4: the peer's responder resources bound what we may issue, its
  // initiator depth what we must absorb; our own explicit choice wins.
  if (id->initiator_depth == 0xff || id->initiator_depth > rep.responder_resources) {
    id->initiator_depth = rep.responder_resources;
  }
  if (id->responder_resources == 0xff || id->responder_resources > rep.initiator_depth) {
    id->responder_resources = rep.initiator_depth;
  }

  auto fill = [&](EventPrivate* event) {
    rdma_conn_param& conn = event->event.param.conn;
    conn.responder_resources = rep.initiator_depth;
    conn.initiator_depth = rep.responder_resources;
    conn.flow_control = rep.flow_control;
    conn.rnr_retry_count = rep.rnr_retry_count;
    conn.srq = rep.srq;
    conn.qp_num = rep.local_qpn;
  };
  EventPrivate* event = nullptr;
  if (id->id.qp == nullptr) {
    // An external QP: the application moves it and calls rdma_establish.
    id->state = IdState::kRepRcvd;
    service->Report(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, rep.private_data.data(),
                    kRepPrivateDataSize, nullptr, &event);
    fill(event);
    PushEvent(id->channel, event);
    return;
  }
  if (int err = ConnectQp(id); err != 0) {
    // ib-cm.md §6.3: a REP the active side cannot use: QP to ERR, REJ 28.
    QpToError(id);
    SendRej(service, id->peer, id->local_comm_id, id->remote_comm_id, mad.transaction_id,
            CmMessageKind::kRep, kRejConsumerDefined, nullptr, 0);
    id->state = IdState::kRejected;
    service->Report(id, RDMA_CM_EVENT_CONNECT_ERROR, -err);
    return;
  }
  SendRtu(service, id);
  id->state = IdState::kEstablished;
  service->Report(id, RDMA_CM_EVENT_ESTABLISHED, 0, rep.private_data.data(), kRepPrivateDataSize,
                  nullptr, &event);
  fill(event);
  PushEvent(id->channel, event);
}

void OnSidrRep(Service* service, const SidrRepMsg& rep, IdPrivate* id) {
  if (id->state != IdState::kSidrReqSent) {
    service->counters.mads_dropped++;
    return;
  }
  if (rep.status == kSidrUnsupported && IsRemotePeerName(id->pending.to) &&
      service->OfferRemoteAgain(id)) {
    return;  // nobody listens there yet: a server may be about to bind the port
  }
  service->Disarm(id);
  if (rep.status != kSidrSuccess) {
    id->state = IdState::kRejected;
    service->Report(id, RDMA_CM_EVENT_UNREACHABLE, rep.status, rep.private_data.data(),
                    kSidrRepPrivateDataSize);
    return;
  }
  id->state = IdState::kUdReady;
  id->remote_qpn = rep.qpn;
  id->qkey = rep.qkey;
  EventPrivate* event = nullptr;
  service->Report(id, RDMA_CM_EVENT_ESTABLISHED, 0, rep.private_data.data(),
                  kSidrRepPrivateDataSize, nullptr, &event);
  rdma_ud_param& ud = event->event.param.ud;
  BuildAhAttr(id, &ud.ah_attr);
  ud.qp_num = rep.qpn;
  ud.qkey = rep.qkey;
  PushEvent(id->channel, event);
}

void OnRtu(Service* service, IdPrivate* id) {
  if (id->state != IdState::kRepSent) return;  // a duplicate
  service->Disarm(id);
  id->state = IdState::kEstablished;
  service->Report(id, RDMA_CM_EVENT_ESTABLISHED, 0);
}

void OnRej(Service* service, const RejMsg& rej, IdPrivate* id) {
  switch (id->state) {
    case IdState::kReqSent:
      // Nobody listens there yet: a server may be about to bind the port.
      if (rej.reason == kRejInvalidServiceId && IsRemotePeerName(id->pending.to) &&
          service->OfferRemoteAgain(id)) {
        return;
      }
      [[fallthrough]];
    case IdState::kRepSent:
    case IdState::kRepRcvd:
      FinishRejected(service, id, rej.reason, rej.private_data.data(), kRejPrivateDataSize);
      return;
    case IdState::kEstablished:
    case IdState::kDreqSent:
      // A REJ for an established connection ends it (stale connection).
      service->Disarm(id);
      QpToError(id);
      id->state = IdState::kTimewait;
      service->ArmTimewait(id);
      ReportDisconnected(service, id, 0);
      return;
    default:
      service->counters.mads_dropped++;
      return;
  }
}

void OnDreq(Service* service, const Mad& mad, const DreqMsg& dreq, IdPrivate* id,
            const std::string& from) {
  if (id == nullptr) {
    // ib-cm.md §6.3: a DREQ for an unknown connection still gets its DREP.
    SendDrep(service, from, 0, dreq.local_comm_id, mad.transaction_id);
    return;
  }
  if (dreq.remote_qpn != id->local_qpn) {
    service->counters.mads_dropped++;  // not for our QP (ib-cm.md §3.3)
    return;
  }
  id->transaction_id = mad.transaction_id;
  switch (id->state) {
    case IdState::kEstablished:
    case IdState::kRepSent:  // the DREQ also says the RTU was sent
      service->Disarm(id);
      id->state = IdState::kDreqRcvd;
      ReportDisconnected(service, id, 0);
      return;
    case IdState::kDreqSent:
      // Both sides disconnect at once: answer, and our own DREQ is answered
      // by theirs.
      SendDrep(service, id->peer, id->local_comm_id, id->remote_comm_id, mad.transaction_id);
      service->Disarm(id);
      id->state = IdState::kTimewait;
      service->ArmTimewait(id);
      ReportDisconnected(service, id, 0);
      return;
    case IdState::kTimewait:
      SendDrep(service, id->peer, id->local_comm_id, id->remote_comm_id, mad.transaction_id);
      return;
    default:
      return;
  }
}

void OnDrep(Service* service, IdPrivate* id) {
  if (id->state != IdState::kDreqSent) return;
  service->Disarm(id);
  id->state = IdState::kTimewait;
  service->ArmTimewait(id);
  ReportDisconnected(service, id, 0);
}

void OnMra(const MraMsg& mra, IdPrivate* id) {
  // The peer needs more time: wait ms(service timeout) more before resending.
  if (!id->pending.armed) return;
  int exponent = mra.service_timeout > 8 ? mra.service_timeout - 8 : 0;
  int64_t extra_ns = (int64_t(1) << std::min(exponent, 24)) * 1000000;
  id->pending.deadline_ns = NowNs() + extra_ns + id->pending.interval_ns;
}

}  // namespace

void HandleMad(Service* service, const Mad& mad, const std::string& from, pid_t from_pid,
               IdPrivate* port_owner) {
  if (const auto* req = std::get_if<ReqMsg>(&mad.message)) {
    if (port_owner == nullptr) {
      service->counters.mads_dropped++;
      return;
    }
    OnReq(service, mad, *req, from, from_pid, port_owner);
    return;
  }
  if (const auto* sidr = std::get_if<SidrReqMsg>(&mad.message)) {
    if (port_owner == nullptr) {
      service->counters.mads_dropped++;
      return;
    }
    OnSidrReq(service, mad, *sidr, from, from_pid, port_owner);
    return;
  }
  // Every other message names our communication id (or request id).
  uint32_t ours = 0;
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, SidrRepMsg>) {
          ours = msg.request_id;
        } else if constexpr (!std::is_same_v<T, ReqMsg> && !std::is_same_v<T, SidrReqMsg>) {
          ours = msg.remote_comm_id;
        }
      },
      mad.message);
  IdPrivate* id = service->FindByCommId(ours);
  if (const auto* dreq = std::get_if<DreqMsg>(&mad.message)) {
    OnDreq(service, mad, *dreq, id, from);
    return;
  }
  if (id == nullptr) {
    service->counters.mads_dropped++;
    SOFTRDMA_LOG(kDebug, "cm: message 0x%x for unknown comm id %u dropped",
                 unsigned(AttributeOf(mad.message)), ours);
    return;
  }
  // Messages of an established exchange come from the peer we talk to; once
  // known, anything else claiming to be it is dropped.
  bool from_peer = id->peer.empty() || id->peer == from;
  if (const auto* rep = std::get_if<RepMsg>(&mad.message)) {
    OnRep(service, mad, *rep, id, from_pid, from);
  } else if (!from_peer) {
    service->counters.mads_dropped++;
  } else if (const auto* sidr_rep = std::get_if<SidrRepMsg>(&mad.message)) {
    OnSidrRep(service, *sidr_rep, id);
  } else if (std::holds_alternative<RtuMsg>(mad.message)) {
    OnRtu(service, id);
  } else if (const auto* rej = std::get_if<RejMsg>(&mad.message)) {
    OnRej(service, *rej, id);
  } else if (std::holds_alternative<DrepMsg>(mad.message)) {
    OnDrep(service, id);
  } else if (const auto* mra = std::get_if<MraMsg>(&mad.message)) {
    OnMra(*mra, id);
  }
}

// Nothing bound the port within the grace period: the answers a CM without
// a listener gives (ib-cm.md §5.2): REJ "invalid service ID" to a REQ,
// SIDR_REP "service ID not supported" to a SIDR_REQ.
void HandleNobodyListens(Service* service, IdPrivate* id) {
  if (id->state == IdState::kReqSent) {
    FinishRejected(service, id, kRejInvalidServiceId, nullptr, 0);
  } else if (id->state == IdState::kSidrReqSent) {
    id->state = IdState::kRejected;
    service->Report(id, RDMA_CM_EVENT_UNREACHABLE, kSidrUnsupported);
  }
}

void HandleRetriesExhausted(Service* service, IdPrivate* id) {
  switch (id->state) {
    case IdState::kReqSent:
    case IdState::kSidrReqSent:
    case IdState::kRepSent:
      // ib-cm.md §6.3: no answer after every retransmission.
      id->state = IdState::kRejected;
      QpToError(id);
      service->Report(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      return;
    case IdState::kDreqSent:
      id->state = IdState::kTimewait;
      service->ArmTimewait(id);
      ReportDisconnected(service, id, -ETIMEDOUT);
      return;
    default:
      return;
  }
}

void HandleTimewaitExit(Service* service, IdPrivate* id) {
  if (id->state != IdState::kTimewait) return;
  service->Report(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
}

void HandlePeerDeath(Service* service, IdPrivate* id) {
  // What the peer's kernel would have sent when the dead process's ids were
  // closed (ib-cm.md §6.3, "destroying an id"): a REJ while connecting, a
  // DREQ once connected.
  switch (id->state) {
    case IdState::kReqSent:
    case IdState::kRepSent:
    case IdState::kRepRcvd:
      FinishRejected(service, id, kRejConsumerDefined, nullptr, 0);
      return;
    case IdState::kReqRcvd:
      // The application still holds the request; its accept will find the
      // peer gone and report UNREACHABLE then.
      return;
    case IdState::kEstablished:
      id->state = IdState::kDreqRcvd;
      ReportDisconnected(service, id, 0);
      return;
    case IdState::kDreqSent:
      service->Disarm(id);
      id->state = IdState::kTimewait;
      service->ArmTimewait(id);
      ReportDisconnected(service, id, 0);
      return;
    default:
      return;
  }
}

// ---- the application's calls ----

int StartConnect(Service* service, IdPrivate* id, const rdma_conn_param* param) {
  if (id->state != IdState::kRouteResolved) return EINVAL;
  // Another host: nobody there may answer (no route, no softrdma, nobody
  // listening); the retransmissions then run out into UNREACHABLE, as with
  // the kernel's CM.
  std::string to;
  bool local = LocalDestination(service, id, &to);
  CmaHeader header;
  header.ip_version = id->id.route.addr.dst_addr.sa_family == AF_INET6 ? 6 : 4;
  header.src_port = PortOf(&id->id.route.addr.src_addr);
  header.src_ip = CmaIpOf(&id->id.route.addr.src_addr);
  header.dst_ip = CmaIpOf(&id->id.route.addr.dst_addr);
  uint64_t service_id = ServiceIdOf(uint16_t(id->id.ps), PortOf(&id->id.route.addr.dst_addr));
  service->AssignCommId(id);
  id->transaction_id = NewTransactionId(id, 0);

  if (IsDatagram(id)) {
    if (param != nullptr && param->private_data_len > kSidrReqUserDataMax) return EINVAL;
    SidrReqMsg req;
    req.request_id = id->local_comm_id;
    req.service_id = service_id;
    EncodeCmaHeader(header,
                    std::span<uint8_t, kCmaHeaderSize>(req.private_data.data(), kCmaHeaderSize));
    if (param != nullptr && param->private_data != nullptr) {
      std::memcpy(req.private_data.data() + kCmaHeaderSize, param->private_data,
                  param->private_data_len);
    }
    id->state = IdState::kSidrReqSent;
    Status status = service->SendWithRetry(id, to, Mad{id->transaction_id, 0, req},
                                           service->cm_interval_ns(true));
    if (local && NobodyListens(status)) service->HoldForListener(id);
    return 0;
  }

  if (param != nullptr && param->private_data_len > kReqUserDataMax) return EINVAL;
  uint8_t rr = param != nullptr ? param->responder_resources : 0;
  uint8_t depth = param != nullptr ? param->initiator_depth : 0;
  if (rr != RDMA_MAX_RESP_RES && rr > DeviceMaxResponder(service)) return EINVAL;
  if (depth != RDMA_MAX_INIT_DEPTH && depth > DeviceMaxInitiator(service)) return EINVAL;
  uint32_t qpn = QpnOf(id, param);
  if (qpn == 0) return EINVAL;
  id->local_qpn = qpn;
  // 0xff asks for the device's maximum (rdma_connect(3)).
  id->responder_resources = rr == RDMA_MAX_RESP_RES ? DeviceMaxResponder(service) : rr;
  id->initiator_depth = depth == RDMA_MAX_INIT_DEPTH ? DeviceMaxInitiator(service) : depth;
  id->retry_count = param != nullptr ? std::min<uint8_t>(param->retry_count, 7) : 7;
  id->rnr_retry_count = param != nullptr ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
  id->flow_control = param != nullptr && param->flow_control != 0;
  id->srq = id->id.srq != nullptr || (param != nullptr && param->srq != 0);
  id->rq_psn = RandomPsn();
  id->local_ack_timeout = id->ack_timeout_set ? id->ack_timeout : kPacketLifeTime + 1;

  ReqMsg req;
  req.local_comm_id = id->local_comm_id;
  req.service_id = service_id;
  req.local_ca_guid = service->node_guid;
  req.local_qpn = qpn;
  req.responder_resources = id->responder_resources;
  req.initiator_depth = id->initiator_depth;
  req.remote_cm_response_timeout = kCmResponseTimeout;
  req.transport = id->id.qp_type == IBV_QPT_UC         ? CmTransport::kUc
                  : id->id.qp_type == IBV_QPT_XRC_SEND ? CmTransport::kXrc
                                                       : CmTransport::kRc;
  req.extended_transport = req.transport == CmTransport::kXrc ? 1 : 0;
  req.flow_control = id->flow_control;
  req.starting_psn = id->rq_psn;
  req.local_cm_response_timeout = kCmResponseTimeout;
  req.retry_count = id->retry_count;
  req.pkey = 0xffff;
  req.path_mtu = id->path_mtu;
  req.rnr_retry_count = id->rnr_retry_count;
  req.max_cm_retries = kMaxCmRetries;
  req.srq = id->srq;
  bool subnet_local = id->path.hop_limit <= 1;
  req.primary_local_lid = subnet_local ? 0 : 0xffff;
  req.primary_remote_lid = subnet_local ? 0 : 0xffff;
  std::memcpy(req.primary_local_gid.data(), id->id.route.addr.addr.ibaddr.sgid.raw, 16);
  std::memcpy(req.primary_remote_gid.data(), id->id.route.addr.addr.ibaddr.dgid.raw, 16);
  uint32_t sport = PortOf(&id->id.route.addr.src_addr);
  uint32_t dport = PortOf(&id->id.route.addr.dst_addr);
  req.primary_flow_label = (sport * 31 + dport) & 0xfffff;
  req.primary_traffic_class = id->tos;
  req.primary_hop_limit = id->path.hop_limit;
  req.primary_subnet_local = subnet_local;
  req.primary_local_ack_timeout = id->local_ack_timeout;
  EncodeCmaHeader(header,
                  std::span<uint8_t, kCmaHeaderSize>(req.private_data.data(), kCmaHeaderSize));
  if (param != nullptr && param->private_data != nullptr) {
    std::memcpy(req.private_data.data() + kCmaHeaderSize, param->private_data,
                param->private_data_len);
  }
  id->state = IdState::kReqSent;
  Status status = service->SendWithRetry(id, to, Mad{id->transaction_id, 0, req},
                                         service->cm_interval_ns(true));
  if (local && NobodyListens(status)) service->HoldForListener(id);
  return 0;
}

int Accept(Service* service, IdPrivate* id, const rdma_conn_param* param) {
  if (id->state == IdState::kSidrReqRcvd) {
    if (param != nullptr && param->private_data_len > kSidrRepPrivateDataSize) return EINVAL;
    uint32_t qpn = QpnOf(id, param);
    if (qpn == 0) return EINVAL;
    SidrRepMsg rep;
    rep.request_id = id->remote_comm_id;
    rep.status = kSidrSuccess;
    rep.qpn = qpn;
    rep.qkey = id->qkey != 0 ? id->qkey : RDMA_UDP_QKEY;
    rep.service_id = ServiceIdOf(uint16_t(id->id.ps), PortOf(&id->id.route.addr.src_addr));
    if (param != nullptr && param->private_data != nullptr) {
      std::memcpy(rep.private_data.data(), param->private_data, param->private_data_len);
    }
    Status status = service->SendMad(id->peer, Mad{id->transaction_id, 0, rep});
    id->state = IdState::kUdReady;
    return status.ok() ? 0 : status.code();
  }
  if (id->state != IdState::kReqRcvd) return EINVAL;
  if (param != nullptr && param->private_data_len > kRepPrivateDataSize) return EINVAL;
  uint32_t qpn = QpnOf(id, param);
  if (qpn == 0) return EINVAL;
  // What the request offered (id->responder_resources / initiator_depth,
  // already seen from our side), bounded by the device and by the
  // application's explicit values (rdma_accept(3)).
  uint8_t rr = param != nullptr ? param->responder_resources : uint8_t{RDMA_MAX_RESP_RES};
  uint8_t depth = param != nullptr ? param->initiator_depth : uint8_t{RDMA_MAX_INIT_DEPTH};
  if (rr == RDMA_MAX_RESP_RES) {
    rr = std::min(id->responder_resources, DeviceMaxResponder(service));
  } else if (rr > DeviceMaxResponder(service)) {
    return EINVAL;
  }
  if (depth == RDMA_MAX_INIT_DEPTH) {
    depth = std::min(id->initiator_depth, DeviceMaxInitiator(service));
  } else if (depth > DeviceMaxInitiator(service)) {
    return EINVAL;
  }
  id->responder_resources = rr;
  id->initiator_depth = depth;
  id->local_qpn = qpn;
  if (param != nullptr) id->flow_control = param->flow_control != 0;
  id->srq = id->id.srq != nullptr || (param != nullptr && param->srq != 0);
  uint8_t rnr_for_peer = param != nullptr ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
  if (int err = ConnectQp(id); err != 0) return err;

  RepMsg rep;
  rep.local_comm_id = id->local_comm_id;
  rep.remote_comm_id = id->remote_comm_id;
  rep.local_qpn = qpn;
  rep.starting_psn = id->rq_psn;
  rep.responder_resources = rr;
  rep.initiator_depth = depth;
  rep.target_ack_delay = kTargetAckDelay;
  rep.flow_control = id->flow_control;
  rep.rnr_retry_count = rnr_for_peer;
  rep.srq = id->srq;
  rep.local_ca_guid = service->node_guid;
  if (param != nullptr && param->private_data != nullptr) {
    std::memcpy(rep.private_data.data(), param->private_data, param->private_data_len);
  }
  id->state = IdState::kRepSent;
  Status status = service->SendWithRetry(id, id->peer, Mad{id->transaction_id, 0, rep},
                                         service->cm_interval_ns(false));
  if (!status.ok() && status.code() != EAGAIN) {
    // The active side is gone (its socket closed): nobody will answer.
    service->Disarm(id);
    id->state = IdState::kRejected;
    QpToError(id);
    service->Report(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED);
  }
  return 0;
}

int Reject(Service* service, IdPrivate* id, const void* private_data, uint8_t len) {
  if (id->state == IdState::kSidrReqRcvd) {
    if (len > kSidrRepPrivateDataSize) return EINVAL;
    SidrRepMsg rep;
    rep.request_id = id->remote_comm_id;
    rep.status = kSidrReject;
    if (private_data != nullptr) std::memcpy(rep.private_data.data(), private_data, len);
    service->SendMad(id->peer, Mad{id->transaction_id, 0, rep});
    id->state = IdState::kRejected;
    return 0;
  }
  if (id->state != IdState::kReqRcvd) return EINVAL;
  if (len > kRejPrivateDataSize) return EINVAL;
  SendRej(service, id->peer, id->local_comm_id, id->remote_comm_id, id->transaction_id,
          CmMessageKind::kReq, kRejConsumerDefined, private_data, len);
  id->state = IdState::kRejected;
  return 0;
}

int Disconnect(Service* service, IdPrivate* id) {
  switch (id->state) {
    case IdState::kEstablished:
    case IdState::kRepSent:
    case IdState::kRepRcvd:
      QpToError(id);
      service->Disarm(id);
      id->state = IdState::kDreqSent;
      SendDreq(service, id);
      return 0;
    case IdState::kDreqRcvd:
      QpToError(id);
      SendDrep(service, id->peer, id->local_comm_id, id->remote_comm_id, id->transaction_id);
      id->state = IdState::kTimewait;
      service->ArmTimewait(id);
      return 0;
    case IdState::kDreqSent:
    case IdState::kTimewait:
      QpToError(id);
      return 0;
    default:
      return EINVAL;
  }
}

int Establish(Service* service, IdPrivate* id) {
  if (id->state != IdState::kRepRcvd) return EINVAL;
  SendRtu(service, id);
  id->state = IdState::kEstablished;
  return 0;
}

int NotifyEstablished(Service* service, IdPrivate* id) {
  // IBV_EVENT_COMM_EST: data arrived before the RTU (ib-cm.md §6.1).
  if (id->state == IdState::kRepSent) OnRtu(service, id);
  return 0;
}

void AbandonConnection(Service* service, IdPrivate* id) {
  service->Disarm(id);
  switch (id->state) {
    case IdState::kReqSent:
      SendRej(service, id->pending.to, id->local_comm_id, 0, id->transaction_id,
              CmMessageKind::kReq, kRejTimeout, nullptr, 0);
      break;
    case IdState::kReqRcvd:
    case IdState::kRepSent:
      SendRej(service, id->peer, id->local_comm_id, id->remote_comm_id, id->transaction_id,
              CmMessageKind::kReq, kRejConsumerDefined, nullptr, 0);
      break;
    case IdState::kRepRcvd:
      SendRej(service, id->peer, id->local_comm_id, id->remote_comm_id, id->transaction_id,
              CmMessageKind::kRep, kRejConsumerDefined, nullptr, 0);
      break;
    case IdState::kEstablished: {
      DreqMsg dreq;
      dreq.local_comm_id = id->local_comm_id;
      dreq.remote_comm_id = id->remote_comm_id;
      dreq.remote_qpn = id->remote_qpn;
      service->SendMad(id->peer, Mad{id->transaction_id, 0, dreq});
      break;
    }
    case IdState::kDreqRcvd:
      SendDrep(service, id->peer, id->local_comm_id, id->remote_comm_id, id->transaction_id);
      break;
    case IdState::kSidrReqRcvd: {
      SidrRepMsg rep;
      rep.request_id = id->remote_comm_id;
      rep.status = kSidrReject;
      service->SendMad(id->peer, Mad{id->transaction_id, 0, rep});
      break;
    }
    default:
      break;
  }
}

}  // namespace softrdma::cm
