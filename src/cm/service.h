// The process's connection manager: one per process, created on first use.
// It owns the process's MAD socket, the listeners' and bound ports' sockets,
// the table of ids by communication id, the retransmission and timewait
// timers, and a thread that sleeps in epoll until a CM message arrives, a
// timer is due or a peer process dies (pidfd). An idle CM uses no CPU.
//
// Everything here runs under one lock (`mu`): connection management is not a
// fast path, and one lock keeps every state change of ib-cm.md §6 atomic with
// respect to the application's calls and the thread.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cm/cm_id.h"
#include "cm/gsi_sender.h"
#include "cm/mad_codec.h"
#include "cm/mad_port.h"

namespace softrdma::cm {

struct CmCounters {
  uint64_t mads_received = 0;
  uint64_t mads_dropped = 0;  // malformed, unknown, stale or for nobody
  uint64_t mads_sent = 0;
  uint64_t retransmissions = 0;
  uint64_t mads_from_gsi = 0;  // from another host (or SOFTRDMA_CM_GSI=1), via QP1
};

class Service {
 public:
  // The process's instance (created, with its thread, on first call).
  // nullptr + errno when the device cannot be opened.
  static Service* Get();

  std::mutex mu;

  // The softrdma device contexts (opened once, kept for the process's life,
  // as librdmacm does) and the default PD per context.
  std::vector<ibv_context*> devices;
  ibv_pd* DefaultPd(ibv_context* context);
  // Binds `id` to the device (port 1) and gives it the device's default PD
  // in id->pd, as librdmacm does the moment an id gets its device:
  // applications (pyverbs among them) allocate with id->pd before any QP.
  void AssignDevice(IdPrivate* id) {
    id->id.verbs = devices[0];
    id->id.port_num = 1;
    if (id->id.pd == nullptr) id->id.pd = DefaultPd(id->id.verbs);
  }
  // The XRC domain librdmacm gives XRC QPs and SRQs of a device (one, private).
  ibv_xrcd* DefaultXrcd(ibv_context* context);
  ibv_device_attr device_attr{};
  uint64_t node_guid = 0;  // host order

  // Ids.
  void Register(IdPrivate* id);
  void Forget(IdPrivate* id);
  uint32_t NewCommId();
  IdPrivate* FindByCommId(uint32_t local_comm_id);
  // The passive id of a request already received from `peer` with the
  // peer's communication (or request) id, if any: a retransmitted REQ.
  IdPrivate* FindByRemote(const std::string& peer, uint32_t remote_comm_id);
  // Gives `id` a fresh local communication id and indexes it.
  void AssignCommId(IdPrivate* id);

  // Ports: bind `id` to `port` in its port space (0 picks a free one).
  Status BindPort(IdPrivate* id, uint16_t port);
  void ReleasePort(IdPrivate* id);
  // A listener's CM must read MADs that come from other hosts through QP1:
  // its UD QP makes the verbs library read the RoCE port (cm/gsi_sender.h).
  void ReadQp1() { gsi_.Open(devices[0], DefaultPd(devices[0])); }

  // Sending. `to` is a socket name (a process of this host) or a
  // RemotePeerName (QP1 of another host's address, cm/gsi_sender.h); an
  // empty one loses the message.
  Status SendMad(const std::string& to, const Mad& mad);
  // Sends and keeps it for retransmission until Disarm.
  Status SendWithRetry(IdPrivate* id, const std::string& to, const Mad& mad, int64_t interval_ns);
  void Disarm(IdPrivate* id) {
    id->pending.armed = false;
    id->pending.unbound_until_ns = 0;
    id->pending.remote_offer_due = false;
  }
  // The REQ/SIDR_REQ just sent found its port unbound: offer it again every
  // millisecond for kListenerGraceMs before HandleNobodyListens. On a network
  // the request would reach the server's CM some time after it was sent and
  // be judged then; a server that binds the port again right after its
  // previous connection (perftest -R does) is found, as the kernel's CM,
  // whose REQ passes through the MAD layer and work queues, finds it.
  // 250 ms, not 20: "right after" is the server's scheduling, and at nice 19
  // on a loaded 2-CPU host a process may wait hundreds of milliseconds for
  // a CPU (537 ms seen, docs/design.md "A responder whose process does not
  // run"); with 20 ms, interop.perftest_rdma_cm.send_lat was refused (REJ 8,
  // perftest crashed) once in a full ctest run at load 12-19. The price: a
  // REQ to a port that stays unbound is refused 250 ms after it was sent
  // instead of 20, still far inside the first retransmission (4.6 s).
  void HoldForListener(IdPrivate* id);
  static constexpr int64_t kListenerGraceMs = 250;
  // A REQ/SIDR_REQ to QP1 of an address was answered "nobody listens"
  // (REJ 8, SIDR_REP 1): within kListenerGraceMs of the first such answer it
  // is sent again a millisecond later and true returned; false once the
  // grace is over (the caller reports the refusal). The same grace as
  // HoldForListener gives between this host's sockets.
  bool OfferRemoteAgain(IdPrivate* id);
  void ArmTimewait(IdPrivate* id);

  // Events.
  void Report(IdPrivate* id, rdma_cm_event_type type, int status,
              const uint8_t* private_data = nullptr, size_t private_len = 0,
              IdPrivate* listen_id = nullptr, EventPrivate** out = nullptr);

  // The peer process of `id` (watched with a pidfd).
  void WatchPeer(IdPrivate* id, pid_t pid);

  const std::string& own_name() const { return own_.name(); }
  int64_t cm_interval_ns(bool active) const;
  int cm_retries() const { return cm_retries_; }

  CmCounters counters;
  // SOFTRDMA_CM_GSI=1 or SOFTRDMA_WIRE=roce: requests go to QP1 of the
  // destination address even when it is this host's.
  bool force_roce = false;

 private:
  Service() = default;
  bool Start();
  void Run();
  void Wake();
  void DrainSocket(MadPort* port, IdPrivate* port_owner);
  void OnTimers(int64_t now);
  void OfferUnboundAgain(IdPrivate* id, int64_t now);
  void OnPeerDeath(pid_t pid);
  int64_t NextDeadline() const;

  // Sends the kernel refused for a full receive queue (EAGAIN: a peer's
  // socket holds few datagrams, /proc/sys/net/unix/max_dgram_qlen), retried
  // every millisecond in order.
  struct Deferred {
    std::string to;
    std::array<uint8_t, kMadSize> mad;
  };
  Status Transmit(const std::string& to, const std::array<uint8_t, kMadSize>& mad);
  Status SendNow(const std::string& to, const std::array<uint8_t, kMadSize>& mad);
  void FlushDeferred();
  std::vector<Deferred> deferred_;

  MadPort own_;    // the process's connection socket
  GsiSender gsi_;  // MADs to other hosts (made on first use)
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::map<uint32_t, IdPrivate*> by_comm_id_;
  std::set<IdPrivate*> ids_;
  std::map<int, IdPrivate*> port_owner_;  // bound port fd -> its id
  std::map<pid_t, int> pidfds_;           // peer pid -> pidfd
  std::map<int, pid_t> pid_of_fd_;
  std::map<ibv_context*, ibv_pd*> default_pds_;
  std::map<ibv_context*, ibv_xrcd*> default_xrcds_;
  int64_t default_interval_active_ns_ = 0;
  int64_t default_interval_passive_ns_ = 0;
  int cm_retries_ = 15;
};

int64_t NowNs();

// A send that found nobody bound at the destination socket: on this host,
// no process has bound that rdma_cm port.
inline bool NobodyListens(const Status& status) {
  return status.code() == ECONNREFUSED || status.code() == ENOENT;
}

// Handlers of received messages (connection.cpp). Called with mu held.
// `port_owner` is the id whose bound port received the message (REQ and
// SIDR_REQ arrive there), nullptr for the process's connection socket.
void HandleMad(Service* service, const Mad& mad, const std::string& from, pid_t from_pid,
               IdPrivate* port_owner);
void HandleRetriesExhausted(Service* service, IdPrivate* id);
// A REQ/SIDR_REQ found no bound port for the whole grace period.
void HandleNobodyListens(Service* service, IdPrivate* id);
void HandleTimewaitExit(Service* service, IdPrivate* id);
void HandlePeerDeath(Service* service, IdPrivate* id);

}  // namespace softrdma::cm
