// Event channels: a pollable fd, EAGAIN when non-blocking and empty, and
// synchronous ids (no channel), whose calls wait for their own events.
#include "rdmacm_fixture.h"

#include <sys/syscall.h>

#include <atomic>
#include <fstream>
#include <thread>

namespace softrdma::rdmacm_test {
namespace {

bool Readable(int fd, int timeout_ms) {
  pollfd pfd{fd, POLLIN, 0};
  return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

TEST(CmEventChannel, FdIsReadableExactlyWhileAnEventIsQueued) {
  RunScenario([] {
    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr) << strerror(errno);
    ASSERT_GE(ch->fd, 0);
    EXPECT_FALSE(Readable(ch->fd, 0));
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    EXPECT_FALSE(Readable(ch->fd, 0));
    sockaddr_in dst = Ipv4("127.0.0.1", 7471);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, Sa(&dst), 2000), 0) << strerror(errno);
    ASSERT_TRUE(Readable(ch->fd, 2000));
    rdma_cm_event* ev = nullptr;
    ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0) << strerror(errno);
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(ev->id, id);
    EXPECT_EQ(rdma_ack_cm_event(ev), 0);
    EXPECT_FALSE(Readable(ch->fd, 0));
    // Two events: readable until both are read.
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    rdma_cm_id* other = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &other, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_resolve_addr(other, nullptr, Sa(&dst), 2000), 0) << strerror(errno);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(Readable(ch->fd, 2000)) << "event " << i;
      ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0) << strerror(errno);
      EXPECT_EQ(ev->status, 0);
      EXPECT_EQ(ev->event,
                ev->id == id ? RDMA_CM_EVENT_ROUTE_RESOLVED : RDMA_CM_EVENT_ADDR_RESOLVED);
      rdma_ack_cm_event(ev);
    }
    EXPECT_FALSE(Readable(ch->fd, 0));
    EXPECT_EQ(rdma_destroy_id(other), 0);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  });
}

TEST(CmEventChannel, NonBlockingEmptyChannelGivesEagain) {
  RunScenario([] {
    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr) << strerror(errno);
    int flags = fcntl(ch->fd, F_GETFL);
    ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
    rdma_cm_event* ev = nullptr;
    errno = 0;
    EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
    EXPECT_EQ(errno, EAGAIN);
    // Still so with an id on it that has no event yet.
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    errno = 0;
    EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  });
}

// A synchronous call waits at most the CM's retry schedule, shortened here.
ScenarioOptions ShortCmTimeouts() {
  ScenarioOptions options;
  options.env = {{"SOFTRDMA_CM_TIMEOUT_MS", "500"}, {"SOFTRDMA_CM_RETRIES", "4"}};
  return options;
}

TEST(CmEventChannel, SynchronousIdsBlockUntilTheirEventsAndGetRequestWorks) {
  RunScenario(ShortCmTimeouts(), [] {
    std::unique_ptr<Peer> peer = StartPeer([](const Pipe& pipe) {
      // A synchronous listener: rdma_get_request hands out the requests.
      rdma_cm_id* listener = nullptr;
      ASSERT_EQ(rdma_create_id(nullptr, &listener, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
      ASSERT_NE(listener->channel, nullptr);
      sockaddr_in addr = Ipv4("127.0.0.1", 0);
      ASSERT_EQ(rdma_bind_addr(listener, Sa(&addr)), 0) << strerror(errno);
      ASSERT_EQ(rdma_listen(listener, 4), 0) << strerror(errno);
      ASSERT_TRUE(pipe.Send(SrcPort(listener)));
      // Bounded: rdma_get_request only once the request is there.
      ASSERT_TRUE(Readable(listener->channel->fd, 5000)) << "no connection request";
      rdma_cm_id* child = nullptr;
      ASSERT_EQ(rdma_get_request(listener, &child), 0) << strerror(errno);
      ASSERT_NE(child, nullptr);
      ASSERT_NE(child->event, nullptr);
      EXPECT_EQ(child->event->event, RDMA_CM_EVENT_CONNECT_REQUEST);
      ibv_pd* pd = ibv_alloc_pd(child->verbs);
      ASSERT_NE(pd, nullptr);
      ASSERT_NE(NewQp(child, pd), nullptr);
      Mem mem;
      ASSERT_TRUE(mem.Register(pd, 64));
      ASSERT_EQ(PostRecv(child->qp, &mem, 0, 64), 0);
      rdma_conn_param param{};
      param.responder_resources = 1;
      param.initiator_depth = 1;
      param.rnr_retry_count = 7;
      // Returns once the connection is established (the RTU arrived).
      ASSERT_EQ(rdma_accept(child, &param), 0) << strerror(errno);
      ASSERT_NE(child->event, nullptr);
      EXPECT_EQ(child->event->event, RDMA_CM_EVENT_ESTABLISHED);
      ibv_wc wc{};
      ASSERT_TRUE(ExpectCompletion(child->recv_cq, IBV_WC_RECV, &wc));
      EXPECT_EQ(wc.byte_len, 5u);
      EXPECT_EQ(std::string(reinterpret_cast<char*>(mem.buf.data()), 5), "hello");
      // The peer disconnects: DISCONNECTED is queued, and our rdma_disconnect
      // (which answers it) returns with it.
      ASSERT_TRUE(Readable(child->channel->fd, 5000)) << "no DISCONNECTED";
      ASSERT_EQ(rdma_disconnect(child), 0) << strerror(errno);
      ASSERT_NE(child->event, nullptr);
      EXPECT_EQ(child->event->event, RDMA_CM_EVENT_DISCONNECTED);
      rdma_destroy_qp(child);
      EXPECT_EQ(rdma_destroy_id(child), 0);
      // rdma_get_request is for synchronous listeners only.
      rdma_event_channel* ch = NewChannel();
      ASSERT_NE(ch, nullptr);
      rdma_cm_id* async_listener = NewListener(ch, Sa(&addr));
      ASSERT_NE(async_listener, nullptr);
      errno = 0;
      EXPECT_EQ(rdma_get_request(async_listener, &child), -1);
      EXPECT_EQ(errno, EINVAL);
      EXPECT_EQ(rdma_destroy_id(async_listener), 0);
      EXPECT_EQ(rdma_destroy_id(listener), 0);
      ibv_dealloc_pd(pd);
    });
    ASSERT_GT(peer->pid, 0);
    uint16_t port = 0;
    ASSERT_TRUE(peer->pipe.Recv(&port));

    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in dst = Ipv4("127.0.0.1", port);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, Sa(&dst), 2000), 0) << strerror(errno);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(id->verbs, nullptr);
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
    ibv_pd* pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(NewQp(id, pd), nullptr);
    rdma_conn_param param = DefaultConnParam();
    // Returns once ESTABLISHED.
    ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ESTABLISHED);
    Mem mem;
    ASSERT_TRUE(mem.Register(pd, 64));
    std::memcpy(mem.buf.data(), "hello", 5);
    ASSERT_EQ(PostSend(id->qp, &mem, 0, 5), 0);
    EXPECT_TRUE(ExpectCompletion(id->send_cq, IBV_WC_SEND));
    // Returns once the peer answered (DISCONNECTED).
    ASSERT_EQ(rdma_disconnect(id), 0) << strerror(errno);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_DISCONNECTED);
    peer->ExpectClean();
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    ibv_dealloc_pd(pd);
  });
}

TEST(CmEventChannel, SynchronousConnectToNobodyFailsWithEconnrefused) {
  RunScenario(ShortCmTimeouts(), [] {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in dst = Ipv4("127.0.0.1", 7471);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, Sa(&dst), 2000), 0) << strerror(errno);
    ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
    ibv_pd* pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(NewQp(id, pd), nullptr);
    errno = 0;
    EXPECT_EQ(rdma_connect(id, nullptr), -1);
    EXPECT_EQ(errno, ECONNREFUSED);
    ASSERT_NE(id->event, nullptr);
    EXPECT_EQ(id->event->event, RDMA_CM_EVENT_REJECTED);
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    ibv_dealloc_pd(pd);
  });
}

// True when thread `tid` of this process sleeps inside read(2): the first
// field of /proc/self/task/<tid>/syscall is the number of the system call it
// is blocked in.
bool BlockedInRead(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  return (in >> number) && number == SYS_read;
}

// As with the kernel's rdma_cm fd, whose close does not wake a thread already
// waiting in it: a thread blocked in rdma_get_cm_event stays blocked when
// another thread destroys the channel. So a program's thread can only see
// EBADF there by calling rdma_get_cm_event after the destroy (rping 44's
// teardown race, which tests/interop/cm_lib.sh tells apart by that error).
TEST(CmEventChannel, DestroyingTheChannelLeavesABlockedReaderBlocked) {
  RunScenario([] {
    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr) << strerror(errno);
    // Shared with the reader, which may outlive this body.
    struct ReaderState {
      std::atomic<pid_t> tid{0};
      std::atomic<bool> returned{false};
    };
    auto reader = std::make_shared<ReaderState>();
    // Detached: it never returns when the rule holds, and the scenario's
    // process ends with it still blocked.
    std::thread([ch, reader] {
      reader->tid = pid_t(syscall(SYS_gettid));
      rdma_cm_event* ev = nullptr;
      rdma_get_cm_event(ch, &ev);
      reader->returned = true;
    }).detach();
    int64_t deadline = NowMs() + 5000;
    while ((reader->tid == 0 || !BlockedInRead(reader->tid)) && NowMs() < deadline) usleep(1000);
    ASSERT_TRUE(BlockedInRead(reader->tid)) << "the reader never blocked in read(2)";
    rdma_destroy_event_channel(ch);
    usleep(300 * 1000);
    EXPECT_FALSE(reader->returned) << "rdma_get_cm_event returned after its channel was destroyed";
    EXPECT_TRUE(BlockedInRead(reader->tid));
    // The process ends here with the reader still blocked; the scenario's
    // _exit does not wait for it, and no state of the destroyed channel is
    // touched again.
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
