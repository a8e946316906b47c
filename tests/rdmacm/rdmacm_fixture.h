// Shared plumbing of the librdmacm tests (public API, built librdmacm.so.1):
//
// * RunScenario: every test body runs in a forked process of its own with a
//   fresh SOFTRDMA_NAMESPACE (and the CM environment it asks for), because a
//   process keeps its CM service and configuration for life. The gtest
//   process itself never calls librdmacm, so it stays single-threaded and
//   every test starts from scratch, whether ctest runs it alone or the whole
//   binary runs at once. The scenario has a deadline; past it the process is
//   killed by its PID and reaped.
// * StartPeer: a second process of a scenario, forked by the body before its
//   first rdma_cm or verbs call (the CM thread must not be forked), with a
//   pipe each way. It dies with its parent (PR_SET_PDEATHSIG).
// * Events: bounded waits for CM events (poll on the channel fd with a
//   timeout, never a blocking read), with events for other ids kept aside.
// * LoopbackPair: a listener and an active id in one process.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

namespace softrdma::rdmacm_test {

inline int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// ---- processes ----

// Waits up to `timeout_ms` for `pid` to end; true (and its status) if it did.
inline bool WaitExit(pid_t pid, int timeout_ms, int* status) {
  int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    pid_t got = waitpid(pid, status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return false;
    if (NowMs() >= deadline) return false;
    usleep(2000);
  }
}

inline void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

inline std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// One end of a pair of pipes between two processes of a scenario.
struct Pipe {
  int in = -1;
  int out = -1;

  bool Write(const void* p, size_t n) const {
    size_t done = 0;
    while (done < n) {
      ssize_t w = write(out, static_cast<const char*>(p) + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += size_t(w);
    }
    return true;
  }
  // Reads exactly `n` bytes within `timeout_ms`.
  bool Read(void* p, size_t n, int timeout_ms) const {
    int64_t deadline = NowMs() + timeout_ms;
    size_t got = 0;
    while (got < n) {
      int64_t left = deadline - NowMs();
      if (left <= 0) return false;
      pollfd pfd{in, POLLIN, 0};
      int ready = poll(&pfd, 1, int(left));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
      ssize_t r = read(in, static_cast<char*>(p) + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += size_t(r);
    }
    return true;
  }
  template <typename T>
  bool Send(const T& value) const {
    return Write(&value, sizeof(value));
  }
  template <typename T>
  bool Recv(T* value, int timeout_ms = 10000) const {
    return Read(value, sizeof(*value), timeout_ms);
  }
  void Close() {
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    in = out = -1;
  }
};

// The exit code of a scenario that skipped itself (GTEST_SKIP).
inline constexpr int kSkippedExitCode = 77;

// The exit code of a forked process: 0 when its gtest checks passed.
inline int ExitCodeOfChecks() {
  fflush(stdout);
  fflush(stderr);
  if (::testing::Test::HasFailure()) return 1;
  return ::testing::Test::IsSkipped() ? kSkippedExitCode : 0;
}

// A process forked by a scenario. The destructor kills and reaps it if it is
// still there.
class Peer {
 public:
  Peer() = default;
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer() {
    Kill();
    pipe.Close();
  }

  pid_t pid = -1;
  Pipe pipe;  // our end: in = from the peer, out = to the peer

  // Waits for the peer to end and expects it to have passed its checks.
  void ExpectClean(int timeout_ms = 10000) {
    if (pid <= 0) return;
    int status = 0;
    if (!WaitExit(pid, timeout_ms, &status)) {
      ADD_FAILURE() << "peer process " << pid << " still running after " << timeout_ms << " ms";
      Kill();
      return;
    }
    pid = -1;
    bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_TRUE(passed) << "peer process failed: " << DescribeExit(status);
  }
  void Kill() {
    KillAndReap(pid);
    pid = -1;
  }
};

// Forks `body(pipe)`; the peer exits when the body returns, with the outcome
// of its checks. Call before the scenario's first rdma_cm or verbs call.
inline std::unique_ptr<Peer> StartPeer(const std::function<void(const Pipe&)>& body) {
  auto peer = std::make_unique<Peer>();
  int up[2], down[2];
  if (pipe(up) != 0) return peer;
  if (pipe(down) != 0) {
    close(up[0]);
    close(up[1]);
    return peer;
  }
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(98);
    close(up[0]);
    close(down[1]);
    Pipe p{down[0], up[1]};
    {
      SCOPED_TRACE("in the peer process");
      body(p);
    }
    _exit(ExitCodeOfChecks());
  }
  close(up[1]);
  close(down[0]);
  peer->pid = pid;
  peer->pipe = Pipe{up[0], down[1]};
  return peer;
}

inline void RemoveNamespaceObjects(const std::string& ns) {
  const std::string prefix = "softrdma-" + ns + "-";
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
      unlink(("/dev/shm/" + std::string(e->d_name)).c_str());
    }
  }
  closedir(d);
}

struct ScenarioOptions {
  int timeout_ms = 20000;
  // Extra environment (SOFTRDMA_CM_TIMEOUT_MS, ...); the CM variables are
  // unset otherwise, so that the defaults apply.
  std::vector<std::pair<std::string, std::string>> env;
};

// Runs `body` in a forked process with a namespace of its own; the test
// fails if the body's checks fail, the process dies, or the deadline passes.
inline void RunScenario(const ScenarioOptions& options, const std::function<void()>& body) {
  static int counter = 0;
  std::string ns = "cmt" + std::to_string(getpid()) + "-" + std::to_string(++counter) + "-" +
                   std::to_string(NowMs() % 1000000);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << strerror(errno);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setenv("SOFTRDMA_NAMESPACE", ns.c_str(), 1);
    unsetenv("SOFTRDMA_CM_TIMEOUT_MS");
    unsetenv("SOFTRDMA_CM_RETRIES");
    for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
    body();
    _exit(ExitCodeOfChecks());
  }
  int status = 0;
  bool ended = WaitExit(pid, options.timeout_ms, &status);
  if (!ended) KillAndReap(pid);
  RemoveNamespaceObjects(ns);
  if (!ended) {
    ADD_FAILURE() << "scenario timed out after " << options.timeout_ms << " ms (killed)";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kSkippedExitCode) {
    GTEST_SKIP() << "the scenario skipped itself (reason above)";
  } else {
    bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_TRUE(passed) << "scenario failed (its messages are above): " << DescribeExit(status);
  }
}

inline void RunScenario(const std::function<void()>& body) {
  RunScenario(ScenarioOptions{}, body);
}

// ---- addresses ----

inline sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

inline sockaddr_in6 Ipv6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}

template <typename T>
sockaddr* Sa(T* addr) {
  return reinterpret_cast<sockaddr*>(addr);
}

inline uint16_t SrcPort(rdma_cm_id* id) {
  return ntohs(rdma_get_src_port(id));
}

// ---- events ----

// A copy of an rdma_cm_event taken before it was acknowledged.
struct Event {
  bool ok = false;  // false: none came in time
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_RESOLVED;
  int status = 0;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listen_id = nullptr;
  rdma_conn_param conn{};  // private_data cleared: see private_data
  rdma_ud_param ud{};      // for UD ESTABLISHED events
  std::vector<uint8_t> private_data;
  const void* join_context = nullptr;  // MULTICAST_JOIN/ERROR: the context given to the join
  int64_t at_ms = 0;                   // when it was read
};

inline std::string Describe(const Event& e) {
  if (!e.ok) return "(no event)";
  return std::string(rdma_event_str(e.type)) + " status " + std::to_string(e.status) +
         " private_data_len " + std::to_string(e.private_data.size());
}

inline Event CopyEvent(const rdma_cm_event* ev) {
  Event e;
  e.ok = true;
  e.type = ev->event;
  e.status = ev->status;
  e.id = ev->id;
  e.listen_id = ev->listen_id;
  e.conn = ev->param.conn;
  e.ud = ev->param.ud;
  const bool multicast =
      ev->event == RDMA_CM_EVENT_MULTICAST_JOIN || ev->event == RDMA_CM_EVENT_MULTICAST_ERROR;
  // A multicast event's private_data is the join's context, not bytes.
  if (multicast) e.join_context = ev->param.ud.private_data;
  if (!multicast && ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len > 0) {
    const auto* p = static_cast<const uint8_t*>(ev->param.conn.private_data);
    e.private_data.assign(p, p + ev->param.conn.private_data_len);
  }
  e.conn.private_data = nullptr;
  e.ud.private_data = nullptr;
  e.at_ms = NowMs();
  return e;
}

inline rdma_event_channel* NewChannel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) {
    ADD_FAILURE() << "rdma_create_event_channel: " << strerror(errno);
    return nullptr;
  }
  // Non-blocking: a read after poll can never block, even if the event
  // behind the token was dropped.
  int flags = fcntl(ch->fd, F_GETFL);
  fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
  return ch;
}

// Reads one event from `ch` within `timeout_ms`.
inline Event ReadEvent(rdma_event_channel* ch, int timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    int64_t left = deadline - NowMs();
    if (left < 0) return Event{};
    pollfd pfd{ch->fd, POLLIN, 0};
    int ready = poll(&pfd, 1, int(left));
    if (ready < 0 && errno != EINTR) return Event{};
    if (ready <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) continue;  // EAGAIN: look again
    Event copy = CopyEvent(ev);
    rdma_ack_cm_event(ev);
    return copy;
  }
}

// The events of one channel. Await takes the first event of a type (and id)
// and keeps the others, in order, for later calls.
class Events {
 public:
  explicit Events(rdma_event_channel* channel) : ch_(channel) {}

  // The first event of `type` for `id` (any id if nullptr) within
  // `timeout_ms`; a failure is recorded if none comes.
  Event Await(rdma_cm_event_type type, rdma_cm_id* id, int timeout_ms = 5000) {
    return AwaitMatch(
        [&](const Event& e) { return e.type == type && (id == nullptr || e.id == id); },
        rdma_event_str(type), timeout_ms);
  }

  // The first event for `id`, whatever its type.
  Event AwaitAnyFor(rdma_cm_id* id, int timeout_ms = 5000) {
    return AwaitMatch([&](const Event& e) { return e.id == id; }, "event for the id", timeout_ms);
  }

  Event AwaitMatch(const std::function<bool(const Event&)>& matches, const char* what,
                   int timeout_ms) {
    for (auto it = stash_.begin(); it != stash_.end(); ++it) {
      if (matches(*it)) {
        Event e = *it;
        stash_.erase(it);
        return e;
      }
    }
    int64_t deadline = NowMs() + timeout_ms;
    for (;;) {
      int64_t left = deadline - NowMs();
      Event e = left > 0 ? ReadEvent(ch_, int(left)) : Event{};
      if (!e.ok) break;
      if (matches(e)) return e;
      stash_.push_back(e);
    }
    ADD_FAILURE() << "no " << what << " within " << timeout_ms
                  << " ms; other events: " << DescribeStash();
    return Event{};
  }

  // The next event, whatever it is (kept ones first), or ok = false.
  Event Next(int timeout_ms) {
    if (!stash_.empty()) {
      Event e = stash_.front();
      stash_.pop_front();
      return e;
    }
    return ReadEvent(ch_, timeout_ms);
  }

  // Drops the kept events of an id about to be destroyed.
  void Forget(rdma_cm_id* id) {
    std::erase_if(stash_, [&](const Event& e) { return e.id == id; });
  }

  std::string DescribeStash() const {
    std::string s = stash_.empty() ? "none" : "";
    for (const Event& e : stash_) s += "[" + Describe(e) + "] ";
    return s;
  }
  const std::deque<Event>& stash() const { return stash_; }
  rdma_event_channel* channel() const { return ch_; }

 private:
  rdma_event_channel* ch_;
  std::deque<Event> stash_;
};

// ---- ids ----

// A listener bound to `addr` (port 0 picks one) listening with `backlog`.
inline rdma_cm_id* NewListener(rdma_event_channel* ch, sockaddr* addr,
                               rdma_port_space ps = RDMA_PS_TCP, int backlog = 16) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, ps) != 0) {
    ADD_FAILURE() << "rdma_create_id: " << strerror(errno);
    return nullptr;
  }
  if (rdma_bind_addr(id, addr) != 0) {
    ADD_FAILURE() << "rdma_bind_addr: " << strerror(errno);
    rdma_destroy_id(id);
    return nullptr;
  }
  if (rdma_listen(id, backlog) != 0) {
    ADD_FAILURE() << "rdma_listen: " << strerror(errno);
    rdma_destroy_id(id);
    return nullptr;
  }
  return id;
}

// An id whose address and route towards `dst` are resolved (both events
// awaited on `events`).
inline rdma_cm_id* NewResolvedId(Events* events, sockaddr* dst, rdma_port_space ps = RDMA_PS_TCP) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(events->channel(), &id, nullptr, ps) != 0) {
    ADD_FAILURE() << "rdma_create_id: " << strerror(errno);
    return nullptr;
  }
  bool ok = false;
  if (rdma_resolve_addr(id, nullptr, dst, 2000) != 0) {
    ADD_FAILURE() << "rdma_resolve_addr: " << strerror(errno);
  } else if (Event e = events->AwaitAnyFor(id); !e.ok) {
  } else if (e.type != RDMA_CM_EVENT_ADDR_RESOLVED || e.status != 0) {
    ADD_FAILURE() << "rdma_resolve_addr gave " << Describe(e) << ", not ADDR_RESOLVED";
  } else if (rdma_resolve_route(id, 2000) != 0) {
    ADD_FAILURE() << "rdma_resolve_route: " << strerror(errno);
  } else if (Event r = events->AwaitAnyFor(id); !r.ok) {
  } else if (r.type != RDMA_CM_EVENT_ROUTE_RESOLVED || r.status != 0) {
    ADD_FAILURE() << "rdma_resolve_route gave " << Describe(r) << ", not ROUTE_RESOLVED";
  } else {
    ok = true;
  }
  if (!ok) {
    events->Forget(id);
    rdma_destroy_id(id);
    return nullptr;
  }
  return id;
}

// rdma_create_qp on `id` with CQs made by librdmacm; returns the QP.
inline ibv_qp* NewQp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_type type = IBV_QPT_RC) {
  ibv_qp_init_attr attr{};
  attr.qp_type = type;
  attr.cap.max_send_wr = 16;
  attr.cap.max_recv_wr = 16;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = 64;
  attr.sq_sig_all = 1;
  if (rdma_create_qp(id, pd, &attr) != 0) {
    ADD_FAILURE() << "rdma_create_qp: " << strerror(errno);
    return nullptr;
  }
  return id->qp;
}

// The connection parameters most tests connect and accept with.
inline rdma_conn_param DefaultConnParam() {
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

// An active id towards `dst` on a channel of its own, address and route
// resolved, with a PD and an RC QP: ready for rdma_connect. The destructor
// tears everything down.
struct ActiveSide {
  rdma_event_channel* ch = nullptr;
  std::unique_ptr<Events> events;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;

  ActiveSide() = default;
  ActiveSide(const ActiveSide&) = delete;
  ActiveSide& operator=(const ActiveSide&) = delete;

  bool Prepare(sockaddr* dst) {
    ch = NewChannel();
    if (ch == nullptr) return false;
    events = std::make_unique<Events>(ch);
    id = NewResolvedId(events.get(), dst);
    if (id == nullptr) return false;
    pd = ibv_alloc_pd(id->verbs);
    if (pd == nullptr) {
      ADD_FAILURE() << "ibv_alloc_pd: " << strerror(errno);
      return false;
    }
    return NewQp(id, pd) != nullptr;
  }

  ~ActiveSide() {
    if (id != nullptr) {
      if (id->qp != nullptr) rdma_destroy_qp(id);
      EXPECT_EQ(rdma_destroy_id(id), 0) << strerror(errno);
    }
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (ch != nullptr) rdma_destroy_event_channel(ch);
  }
};

// Takes the next CONNECT_REQUEST on `events`, gives its id a PD (*pd) and an
// RC QP, accepts with DefaultConnParam and waits for ESTABLISHED. Returns the
// passive id, or nullptr after recording a failure.
inline rdma_cm_id* AcceptNext(Events* events, ibv_pd** pd) {
  Event req = events->Await(RDMA_CM_EVENT_CONNECT_REQUEST, nullptr);
  if (!req.ok) return nullptr;
  *pd = ibv_alloc_pd(req.id->verbs);
  if (*pd == nullptr) {
    ADD_FAILURE() << "ibv_alloc_pd: " << strerror(errno);
    return nullptr;
  }
  if (NewQp(req.id, *pd) == nullptr) return nullptr;
  rdma_conn_param param = DefaultConnParam();
  if (rdma_accept(req.id, &param) != 0) {
    ADD_FAILURE() << "rdma_accept: " << strerror(errno);
    return nullptr;
  }
  return events->Await(RDMA_CM_EVENT_ESTABLISHED, req.id).ok ? req.id : nullptr;
}

// ---- data ----

// A registered buffer.
struct Mem {
  std::vector<uint8_t> buf;
  ibv_mr* mr = nullptr;
  Mem() = default;
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  ~Mem() {
    if (mr != nullptr) ibv_dereg_mr(mr);
  }
  bool Register(ibv_pd* pd, size_t size) {
    buf.assign(size, 0);
    mr = ibv_reg_mr(pd, buf.data(), size, IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) ADD_FAILURE() << "ibv_reg_mr: " << strerror(errno);
    return mr != nullptr;
  }
  ibv_sge Sge(size_t offset, size_t len) {
    return ibv_sge{reinterpret_cast<uintptr_t>(buf.data() + offset), uint32_t(len), mr->lkey};
  }
};

inline int PostRecv(ibv_qp* qp, Mem* mem, size_t offset, size_t len, uint64_t wr_id = 1) {
  ibv_sge sge = mem->Sge(offset, len);
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

// A signaled SEND; for UD, `ah`, `remote_qpn` and `qkey` address it.
inline int PostSend(ibv_qp* qp, Mem* mem, size_t offset, size_t len, uint64_t wr_id = 2,
                    ibv_ah* ah = nullptr, uint32_t remote_qpn = 0, uint32_t qkey = 0) {
  ibv_sge sge = mem->Sge(offset, len);
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (ah != nullptr) {
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = qkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

// One completion from `cq` within `timeout_ms`.
inline bool PollOne(ibv_cq* cq, ibv_wc* wc, int timeout_ms = 5000) {
  int64_t deadline = NowMs() + timeout_ms;
  do {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return false;
    if (n == 1) return true;
  } while (NowMs() < deadline);
  return false;
}

// A successful completion from `cq`, checked.
inline bool ExpectCompletion(ibv_cq* cq, ibv_wc_opcode opcode, ibv_wc* out = nullptr) {
  ibv_wc wc{};
  if (!PollOne(cq, &wc)) {
    ADD_FAILURE() << "no completion within 5 s";
    return false;
  }
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != opcode) {
    ADD_FAILURE() << "completion " << ibv_wc_status_str(wc.status) << " opcode " << wc.opcode;
    return false;
  }
  if (out != nullptr) *out = wc;
  return true;
}

// ---- one process, both ends ----

// An IPv4 or IPv6 address (by the text's form) with a port.
struct IpAddress {
  sockaddr_storage storage{};
  IpAddress(const char* ip, uint16_t port) {
    if (strchr(ip, ':') != nullptr) {
      sockaddr_in6 a = Ipv6(ip, port);
      std::memcpy(&storage, &a, sizeof(a));
    } else {
      sockaddr_in a = Ipv4(ip, port);
      std::memcpy(&storage, &a, sizeof(a));
    }
  }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
};

// A listener on 127.0.0.1 (or `ip`) and an active id resolved towards it,
// each on a channel of its own, and a PD for their QPs.
struct LoopbackPair {
  rdma_event_channel* server_ch = nullptr;
  rdma_event_channel* client_ch = nullptr;
  std::unique_ptr<Events> server_events;
  std::unique_ptr<Events> client_events;
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  rdma_cm_id* server = nullptr;  // the CONNECT_REQUEST's id
  ibv_pd* pd = nullptr;
  uint16_t port = 0;

  LoopbackPair() = default;
  LoopbackPair(const LoopbackPair&) = delete;
  LoopbackPair& operator=(const LoopbackPair&) = delete;

  // Creates the channels and the listener only.
  bool Listen(rdma_port_space ps = RDMA_PS_TCP, const char* ip = "127.0.0.1") {
    server_ch = NewChannel();
    client_ch = NewChannel();
    if (server_ch == nullptr || client_ch == nullptr) return false;
    server_events = std::make_unique<Events>(server_ch);
    client_events = std::make_unique<Events>(client_ch);
    IpAddress addr(ip, 0);
    listener = NewListener(server_ch, addr.sa(), ps);
    if (listener == nullptr) return false;
    port = SrcPort(listener);
    return port != 0;
  }

  // Listen, resolve the active id towards the listener, allocate the PD.
  bool Prepare(rdma_port_space ps = RDMA_PS_TCP, const char* ip = "127.0.0.1") {
    if (!Listen(ps, ip)) return false;
    IpAddress dst(ip, port);
    client = NewResolvedId(client_events.get(), dst.sa(), ps);
    if (client == nullptr) return false;
    pd = ibv_alloc_pd(client->verbs);
    if (pd == nullptr) ADD_FAILURE() << "ibv_alloc_pd: " << strerror(errno);
    return pd != nullptr;
  }

  // Waits for the CONNECT_REQUEST and takes its id as `server`.
  Event AwaitRequest(int timeout_ms = 5000) {
    Event e = server_events->Await(RDMA_CM_EVENT_CONNECT_REQUEST, nullptr, timeout_ms);
    if (e.ok) server = e.id;
    return e;
  }

  // Connects with default parameters: QPs on both ids, connect, accept, and
  // ESTABLISHED on both sides.
  bool Establish(ibv_qp_type type = IBV_QPT_RC) {
    if (NewQp(client, pd, type) == nullptr) return false;
    rdma_conn_param param = DefaultConnParam();
    if (rdma_connect(client, &param) != 0) {
      ADD_FAILURE() << "rdma_connect: " << strerror(errno);
      return false;
    }
    if (!AwaitRequest().ok || NewQp(server, pd, type) == nullptr) return false;
    if (rdma_accept(server, &param) != 0) {
      ADD_FAILURE() << "rdma_accept: " << strerror(errno);
      return false;
    }
    Event c = client_events->Await(RDMA_CM_EVENT_ESTABLISHED, client);
    if (type == IBV_QPT_UD) return c.ok;
    Event s = server_events->Await(RDMA_CM_EVENT_ESTABLISHED, server);
    return c.ok && s.ok;
  }

  ~LoopbackPair() {
    for (rdma_cm_id* id : {server, client}) {
      if (id == nullptr) continue;
      if (id->qp != nullptr) rdma_destroy_qp(id);
      rdma_destroy_id(id);
    }
    if (listener != nullptr) rdma_destroy_id(listener);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (server_ch != nullptr) rdma_destroy_event_channel(server_ch);
    if (client_ch != nullptr) rdma_destroy_event_channel(client_ch);
  }
};

}  // namespace softrdma::rdmacm_test
