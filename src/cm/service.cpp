#include "cm/service.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include "util/gsi_route.h"
#include "util/log.h"

namespace softrdma::cm {
namespace {

constexpr int64_t kMs = 1000000;

int64_t EnvMs(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || parsed <= 0) return fallback;
  return parsed;
}

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

}  // namespace

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Service* Service::Get() {
  // Never destroyed: ids may outlive static destructors (an application that
  // exits without destroying them), and its thread must not touch freed state.
  static Service* instance = [] {
    auto* service = new Service;
    if (!service->Start()) {
      int err = errno;
      delete service;
      errno = err;
      return static_cast<Service*>(nullptr);
    }
    return service;
  }();
  if (instance == nullptr) errno = ENODEV;
  return instance;
}

bool Service::Start() {
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr) return false;
  for (int i = 0; i < num; ++i) {
    ibv_context* context = ibv_open_device(list[i]);
    if (context != nullptr) devices.push_back(context);
  }
  ibv_free_device_list(list);
  if (devices.empty()) {
    errno = ENODEV;
    return false;
  }
  ibv_query_device(devices[0], &device_attr);
  node_guid = be64toh(device_attr.node_guid);

  // ib-cm.md §6.3: REQ every 2 packet lifetimes + the peer's response
  // timeout (4608 ms), REP and DREQ of the passive side every 4096 ms,
  // 15 retransmissions. SOFTRDMA_CM_TIMEOUT_MS / SOFTRDMA_CM_RETRIES shorten
  // them (tests of UNREACHABLE cannot wait 74 s).
  int64_t interval_ms = EnvMs("SOFTRDMA_CM_TIMEOUT_MS", 0);
  default_interval_active_ns_ = (interval_ms > 0 ? interval_ms : 4608) * kMs;
  default_interval_passive_ns_ = (interval_ms > 0 ? interval_ms : 4096) * kMs;
  cm_retries_ = int(EnvMs("SOFTRDMA_CM_RETRIES", 15));
  // SOFTRDMA_CM_GSI=1, and SOFTRDMA_WIRE=roce (every peer over UDP): the
  // CM's messages go to QP1 of the peer's address even on this host.
  const char* wire = std::getenv("SOFTRDMA_WIRE");
  const char* gsi = std::getenv("SOFTRDMA_CM_GSI");
  force_roce = (wire != nullptr && std::strcmp(wire, "roce") == 0) ||
               (gsi != nullptr && std::strcmp(gsi, "1") == 0);

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);

  // The connection socket: a process-unique name in the CM's private port
  // space 0 (no rdma_cm port space is 0), on a random port number.
  Status status;
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint16_t port = uint16_t(Rng()() | 1);
    status = own_.Open(0, port);
    if (status.ok()) break;
  }
  if (!status.ok()) {
    errno = status.code();
    return false;
  }
  ev.data.fd = own_.fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, own_.fd(), &ev);
  thread_ = std::thread([this] { Run(); });
  thread_.detach();
  return true;
}

ibv_pd* Service::DefaultPd(ibv_context* context) {
  auto it = default_pds_.find(context);
  if (it != default_pds_.end()) return it->second;
  ibv_pd* pd = ibv_alloc_pd(context);
  if (pd != nullptr) default_pds_[context] = pd;
  return pd;
}

ibv_xrcd* Service::DefaultXrcd(ibv_context* context) {
  auto it = default_xrcds_.find(context);
  if (it != default_xrcds_.end()) return it->second;
  ibv_xrcd_init_attr attr{};
  attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  attr.fd = -1;  // a private domain
  attr.oflags = O_CREAT;
  ibv_xrcd* xrcd = ibv_open_xrcd(context, &attr);
  if (xrcd != nullptr) default_xrcds_[context] = xrcd;
  return xrcd;
}

void Service::Register(IdPrivate* id) {
  ids_.insert(id);
}

void Service::Forget(IdPrivate* id) {
  ids_.erase(id);
  if (id->local_comm_id != 0) by_comm_id_.erase(id->local_comm_id);
  ReleasePort(id);
}

uint32_t Service::NewCommId() {
  // The connection socket's number in the top half lets any process of the
  // host route a message for this id to us (util/gsi_route.h); the serial
  // starts at a random point so a restarted process does not reuse the
  // previous one's ids first.
  static uint16_t serial = uint16_t(Rng()());
  for (;;) {
    ++serial;
    uint32_t comm_id = MakeCommId(own_.port(), serial);
    if (serial != 0 && by_comm_id_.count(comm_id) == 0) return comm_id;
  }
}

void Service::AssignCommId(IdPrivate* id) {
  if (id->local_comm_id != 0) by_comm_id_.erase(id->local_comm_id);
  id->local_comm_id = NewCommId();
  by_comm_id_[id->local_comm_id] = id;
}

IdPrivate* Service::FindByRemote(const std::string& peer, uint32_t remote_comm_id) {
  for (IdPrivate* id : ids_) {
    if (id->remote_comm_id == remote_comm_id && id->peer == peer && id->listener_side) return id;
  }
  return nullptr;
}

IdPrivate* Service::FindByCommId(uint32_t local_comm_id) {
  auto it = by_comm_id_.find(local_comm_id);
  return it == by_comm_id_.end() ? nullptr : it->second;
}

Status Service::BindPort(IdPrivate* id, uint16_t port) {
  auto mad_port = std::make_unique<MadPort>();
  uint16_t ps = uint16_t(id->id.ps);
  Status status;
  if (port != 0) {
    status = mad_port->Open(ps, port);
  } else {
    // Ephemeral ports as the kernel's rdma_cm picks them: random in the
    // local port range, retried on collision.
    std::uniform_int_distribution<int> pick(32768, 60999);
    for (int attempt = 0; attempt < 256; ++attempt) {
      status = mad_port->Open(ps, uint16_t(pick(Rng())));
      if (status.ok() || status.code() != EADDRINUSE) break;
    }
  }
  if (!status.ok()) return status;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = mad_port->fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, mad_port->fd(), &ev);
  port_owner_[mad_port->fd()] = id;
  id->port = std::move(mad_port);
  return Status::Ok();
}

void Service::ReleasePort(IdPrivate* id) {
  if (!id->port) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, id->port->fd(), nullptr);
  port_owner_.erase(id->port->fd());
  id->port.reset();
}

Status Service::SendMad(const std::string& to, const Mad& mad) {
  std::array<uint8_t, kMadSize> bytes;
  EncodeMad(mad, bytes);
  return Transmit(to, bytes);
}

Status Service::SendNow(const std::string& to, const std::array<uint8_t, kMadSize>& mad) {
  if (!IsRemotePeerName(to)) return own_.SendTo(to, mad);
  Gid local_gid{};
  Gid remote_gid{};
  if (!ParseRemotePeerName(to, &local_gid, &remote_gid)) return Status::Error(EINVAL, to);
  return gsi_.Send(devices[0], DefaultPd(devices[0]), local_gid, remote_gid, mad);
}

Status Service::Transmit(const std::string& to, const std::array<uint8_t, kMadSize>& mad) {
  counters.mads_sent++;
  if (to.empty()) return Status::Ok();  // nowhere to send: lost like a packet
  if (!deferred_.empty()) {
    deferred_.push_back({to, mad});  // keep the order behind those waiting
    return Status::Ok();
  }
  Status status = SendNow(to, mad);
  if (status.code() == EAGAIN) {
    deferred_.push_back({to, mad});
    Wake();
    return Status::Ok();
  }
  return status;
}

void Service::FlushDeferred() {
  size_t sent = 0;
  for (; sent < deferred_.size(); ++sent) {
    Status status = SendNow(deferred_[sent].to, deferred_[sent].mad);
    if (status.code() == EAGAIN) break;  // still full: try again in a millisecond
  }
  deferred_.erase(deferred_.begin(), deferred_.begin() + long(sent));
}

int64_t Service::cm_interval_ns(bool active) const {
  return active ? default_interval_active_ns_ : default_interval_passive_ns_;
}

Status Service::SendWithRetry(IdPrivate* id, const std::string& to, const Mad& mad,
                              int64_t interval_ns) {
  EncodeMad(mad, id->pending.mad);
  id->pending.to = to;
  id->pending.sends_left = cm_retries_;
  id->pending.interval_ns = interval_ns;
  id->pending.deadline_ns = NowNs() + interval_ns;
  id->pending.armed = true;
  id->pending.unbound_until_ns = 0;
  Status status = Transmit(to, id->pending.mad);
  Wake();  // the thread recomputes its sleep with the new deadline
  return status;
}

void Service::HoldForListener(IdPrivate* id) {
  id->pending.unbound_until_ns = NowNs() + kListenerGraceMs * kMs;
  id->pending.deadline_ns = NowNs() + kMs;
  Wake();
}

bool Service::OfferRemoteAgain(IdPrivate* id) {
  if (!id->pending.armed) return false;
  int64_t now = NowNs();
  if (id->pending.unbound_until_ns == 0)
    id->pending.unbound_until_ns = now + kListenerGraceMs * kMs;
  if (now >= id->pending.unbound_until_ns) return false;
  id->pending.remote_offer_due = true;
  id->pending.deadline_ns = now + kMs;
  Wake();
  return true;
}

void Service::OfferUnboundAgain(IdPrivate* id, int64_t now) {
  Status status = Transmit(id->pending.to, id->pending.mad);
  if (!NobodyListens(status)) {
    // Delivered (or lost for another reason): the usual retransmissions.
    id->pending.unbound_until_ns = 0;
    id->pending.deadline_ns = now + id->pending.interval_ns;
    return;
  }
  if (now < id->pending.unbound_until_ns) {
    id->pending.deadline_ns = now + kMs;
    return;
  }
  id->pending.unbound_until_ns = 0;
  id->pending.armed = false;
  HandleNobodyListens(this, id);
}

void Service::ArmTimewait(IdPrivate* id) {
  // TIMEWAIT lasts ms(local ACK timeout) (ib-cm.md §6.3); at least 1 ms.
  int exponent = id->local_ack_timeout > 8 ? id->local_ack_timeout - 8 : 0;
  int64_t ms = int64_t(1) << std::min(exponent, 20);
  id->timewait_deadline_ns = NowNs() + ms * kMs;
  Wake();
}

void Service::Report(IdPrivate* id, rdma_cm_event_type type, int status,
                     const uint8_t* private_data, size_t private_len, IdPrivate* listen_id,
                     EventPrivate** out) {
  auto* event = new EventPrivate;
  event->owner = id;
  event->event.id = &id->id;
  event->event.listen_id = listen_id != nullptr ? &listen_id->id : nullptr;
  event->event.event = type;
  event->event.status = status;
  if (private_data != nullptr && private_len > 0) {
    private_len = std::min(private_len, sizeof(event->private_data));
    std::memcpy(event->private_data, private_data, private_len);
    event->event.param.conn.private_data = event->private_data;
    event->event.param.conn.private_data_len = uint8_t(private_len);
  }
  if (out != nullptr)
    *out = event;  // the caller fills param, then pushes
  else
    PushEvent(listen_id != nullptr ? listen_id->channel : id->channel, event);
}

void Service::WatchPeer(IdPrivate* id, pid_t pid) {
  id->peer_pid = pid;
  if (pid <= 0 || pid == getpid() || pidfds_.count(pid) != 0) return;
  int fd = int(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;  // already gone: the next message to it will fail
  pidfds_[pid] = fd;
  pid_of_fd_[fd] = pid;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void Service::Wake() {
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

int64_t Service::NextDeadline() const {
  int64_t next = deferred_.empty() ? INT64_MAX : NowNs() + kMs;
  for (IdPrivate* id : ids_) {
    if (id->pending.armed) next = std::min(next, id->pending.deadline_ns);
    if (id->timewait_deadline_ns != 0) next = std::min(next, id->timewait_deadline_ns);
  }
  return next;
}

void Service::Run() {
  epoll_event events[16];
  for (;;) {
    int timeout_ms;
    {
      std::lock_guard<std::mutex> lock(mu);
      int64_t next = NextDeadline();
      if (next == INT64_MAX) {
        timeout_ms = -1;  // nothing pending: sleep until a message or a wake-up
      } else {
        int64_t wait = next - NowNs();
        timeout_ms = wait <= 0 ? 0 : int((wait + kMs - 1) / kMs);
      }
    }
    int n = epoll_wait(epoll_fd_, events, 16, timeout_ms);
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < std::max(n, 0); ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t value;
        ssize_t ignored = read(wake_fd_, &value, sizeof(value));
        (void)ignored;
      } else if (fd == own_.fd()) {
        DrainSocket(&own_, nullptr);
      } else if (auto it = port_owner_.find(fd); it != port_owner_.end()) {
        DrainSocket(it->second->port.get(), it->second);
      } else if (auto pit = pid_of_fd_.find(fd); pit != pid_of_fd_.end()) {
        OnPeerDeath(pit->second);
      }
    }
    OnTimers(NowNs());
  }
}

void Service::DrainSocket(MadPort* port, IdPrivate* port_owner) {
  uint8_t buf[kGsiEnvelopeSize + 64];
  for (int budget = 0; budget < 256; ++budget) {
    size_t len = 0;
    std::string from;
    pid_t from_pid = 0;
    uid_t from_uid = 0;
    Status status = port->Receive(buf, &len, &from, &from_pid, &from_uid);
    if (!status.ok()) return;
    counters.mads_received++;
    std::span<const uint8_t> bytes(buf, std::min(len, sizeof(buf)));
    GsiEnvelope envelope;
    std::span<const uint8_t> inner;
    if (DecodeGsiEnvelope(bytes, &envelope, &inner)) {
      // From another host through the GSI forwarder of whichever process of
      // ours received it: the peer is the pair of addresses, the forwarder's
      // pid is not the peer's. Only our own user's forwarders are believed
      // (any process can send to an abstract socket).
      if (from_uid != getuid()) {
        counters.mads_dropped++;
        continue;
      }
      from = RemotePeerName(envelope.local_gid, envelope.remote_gid);
      from_pid = 0;
      if (counters.mads_from_gsi++ == 0)
        SOFTRDMA_LOG(kInfo, "cm: first MAD through QP1 (the GSI), from %s", from.c_str());
      bytes = inner;
      len = inner.size();
    }
    DecodeError error;
    std::optional<Mad> mad = DecodeMad(bytes, &error);
    if (!mad || len != kMadSize) {
      counters.mads_dropped++;
      SOFTRDMA_LOG(kDebug, "cm: dropped a MAD from %s: %s", from.c_str(),
                   mad ? "wrong length" : DecodeErrorName(error));
      continue;
    }
    HandleMad(this, *mad, from, from_pid, port_owner);
    // A handler may have destroyed nothing (ids die only by the
    // application's call), but it may have released this very port.
    if (port_owner != nullptr && port_owner->port.get() != port) return;
  }
}

void Service::OnTimers(int64_t now) {
  if (!deferred_.empty()) FlushDeferred();
  std::vector<IdPrivate*> due(ids_.begin(), ids_.end());
  for (IdPrivate* id : due) {
    if (ids_.count(id) == 0) continue;
    if (id->pending.armed && id->pending.deadline_ns <= now && id->pending.remote_offer_due) {
      // Offered again after "nobody listens" came back; not a retransmission.
      id->pending.remote_offer_due = false;
      id->pending.deadline_ns = now + id->pending.interval_ns;
      Transmit(id->pending.to, id->pending.mad);
    } else if (id->pending.armed && id->pending.deadline_ns <= now &&
               id->pending.unbound_until_ns != 0 && !IsRemotePeerName(id->pending.to)) {
      OfferUnboundAgain(id, now);
    } else if (id->pending.armed && id->pending.deadline_ns <= now) {
      if (id->pending.sends_left <= 0) {
        id->pending.armed = false;
        HandleRetriesExhausted(this, id);
      } else {
        id->pending.sends_left--;
        id->pending.deadline_ns = now + id->pending.interval_ns;
        counters.retransmissions++;
        Transmit(id->pending.to, id->pending.mad);
      }
    }
    if (ids_.count(id) != 0 && id->timewait_deadline_ns != 0 && id->timewait_deadline_ns <= now) {
      id->timewait_deadline_ns = 0;
      HandleTimewaitExit(this, id);
    }
  }
}

void Service::OnPeerDeath(pid_t pid) {
  auto it = pidfds_.find(pid);
  if (it != pidfds_.end()) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
    pid_of_fd_.erase(it->second);
    close(it->second);
    pidfds_.erase(it);
  }
  std::vector<IdPrivate*> affected;
  for (IdPrivate* id : ids_) {
    if (id->peer_pid == pid) affected.push_back(id);
  }
  for (IdPrivate* id : affected) {
    if (ids_.count(id) != 0) HandlePeerDeath(this, id);
  }
}

}  // namespace softrdma::cm
