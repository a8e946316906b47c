// The connection manager's view of an rdma_cm_id: the public struct first
// (applications hold pointers to it), then the CM state of ib-cm.md §6.2
// folded together with rdma_cm's own (address, route, listen).
#pragma once

#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cm/event_channel.h"
#include "cm/mad_codec.h"
#include "cm/mad_port.h"

namespace softrdma::cm {

enum class IdState {
  kIdle,           // created, or bound
  kAddrResolved,   // rdma_resolve_addr done
  kRouteResolved,  // rdma_resolve_route done
  kListen,         // rdma_listen
  kReqSent,        // active: REQ out, waiting for REP/REJ
  kReqRcvd,        // passive: CONNECT_REQUEST delivered, waiting for accept/reject
  kRepSent,        // passive: REP out, waiting for RTU
  kRepRcvd,        // active, no QP on the id: CONNECT_RESPONSE delivered, waiting for establish
  kEstablished,
  kDreqSent,     // waiting for DREP
  kDreqRcvd,     // DISCONNECTED delivered, our DREP not sent yet
  kTimewait,     // disconnected
  kSidrReqSent,  // active UD: SIDR_REQ out
  kSidrReqRcvd,  // passive UD: CONNECT_REQUEST delivered
  kUdReady,      // UD: resolved by SIDR (active) or answered (passive)
  kRejected,     // REJ or error ended the attempt; only destroy remains
};

const char* IdStateName(IdState state);

// A message the CM retransmits until its answer arrives (ib-cm.md §6.3).
struct PendingSend {
  bool armed = false;
  std::array<uint8_t, kMadSize> mad{};
  std::string to;           // destination socket name
  int sends_left = 0;       // retransmissions still allowed
  int64_t deadline_ns = 0;  // next retransmission
  int64_t interval_ns = 0;
  // A REQ or SIDR_REQ to a port of this host that nobody has bound: until
  // this time it is offered again every millisecond (a server may be about
  // to bind it), then it is answered as a CM without a listener answers.
  // 0 = not in that state.
  int64_t unbound_until_ns = 0;
  // The same for a request to QP1 of an address (another host, or
  // SOFTRDMA_WIRE=roce): the answer "nobody listens" comes back as a REJ or
  // SIDR_REP, after which the request is sent again once (Service::
  // OfferRemoteAgain) and the usual retransmission timer resumes.
  bool remote_offer_due = false;
};

// A multicast group joined through the id (rdma_join_multicast).
struct Membership {
  uint64_t handle = 0;  // names it in its MULTICAST_JOIN event
  sockaddr_storage addr{};
  uint16_t join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
  void* context = nullptr;  // the application's, returned in the event
  ibv_gid mgid{};
};

struct IdPrivate {
  rdma_cm_id id{};  // must stay first
  ChannelPrivate* channel = nullptr;
  bool sync = false;  // created with a NULL channel: calls wait for their event
  IdState state = IdState::kIdle;

  // Bound port (listeners and active ids); children of a listener share the
  // listener's port and have none of their own.
  std::unique_ptr<MadPort> port;
  int gid_index = -1;
  ibv_sa_path_rec path{};
  int backlog = 0;
  int pending_requests = 0;       // CONNECT_REQUESTs queued and not yet read (listener)
  IdPrivate* listener = nullptr;  // the listener a child came from, until the event is read
  bool listener_side = false;     // created by a request (passive side)

  // Options (rdma_set_option).
  uint8_t tos = 0;
  bool ack_timeout_set = false;
  uint8_t ack_timeout = 0;

  // Connection (IB CM) state.
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t transaction_id = 0;
  std::string peer;    // peer's socket name (replies go there)
  pid_t peer_pid = 0;  // the peer's process: its death ends the connection
  uint32_t remote_qpn = 0;
  uint32_t local_qpn = 0;
  uint32_t sq_psn = 0;              // first PSN we send
  uint32_t rq_psn = 0;              // first PSN we expect
  uint8_t responder_resources = 0;  // our max_dest_rd_atomic
  uint8_t initiator_depth = 0;      // our max_rd_atomic
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = 0;  // IBV_MTU_*
  uint8_t local_ack_timeout = 0;
  bool flow_control = false;
  bool srq = false;
  uint32_t qkey = 0;  // UD
  Gid remote_gid{};
  PendingSend pending;
  int64_t timewait_deadline_ns = 0;
  bool disconnected_reported = false;

  // Events of this id handed to the application and not acknowledged yet:
  // rdma_destroy_id waits for them (rdma_get_cm_event(3)), so that a thread
  // still handling one never sees its id freed. Changed under the channel's
  // mutex (handing out) and the service's (acknowledging).
  int unacked_events = 0;

  // Multicast groups joined (cm/multicast.cpp).
  std::vector<Membership> memberships;
  uint64_t next_membership_handle = 1;

  // What rdma_create_qp created on the application's behalf.
  bool own_cqs = false;
  // rdma_create_ep on a passive id: the QP to create for each request.
  bool has_ep_qp_attr = false;
  ibv_qp_init_attr ep_qp_attr{};
  ibv_pd* ep_pd = nullptr;

  bool bound() const { return port != nullptr; }

  static IdPrivate* Of(rdma_cm_id* id) { return reinterpret_cast<IdPrivate*>(id); }
};

}  // namespace softrdma::cm
