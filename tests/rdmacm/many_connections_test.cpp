// One listener accepts 100 connections from another process, one after the
// other; each moves a message each way and is disconnected, alternately by
// either side, with DISCONNECTED on both.
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

constexpr uint32_t kConnections = 100;
constexpr uint32_t kRequestMagic = 0x52455131;  // "REQ1"
constexpr uint32_t kReplyMagic = 0x52455032;    // "REP2"

struct Message {
  uint32_t magic;
  uint32_t index;
};

// Even connections are disconnected by the active side, odd ones by the
// passive side; the other side answers with its own rdma_disconnect.
bool ActiveDisconnects(uint32_t i) {
  return i % 2 == 0;
}

// Ends connection `i` on `id` and expects DISCONNECTED.
void Disconnect(Events* events, rdma_cm_id* id, bool we_start, uint32_t i) {
  SCOPED_TRACE(we_start ? "disconnecting first" : "answering the peer's disconnect");
  if (we_start) {
    ASSERT_EQ(rdma_disconnect(id), 0) << "connection " << i << ": " << strerror(errno);
    ASSERT_TRUE(events->Await(RDMA_CM_EVENT_DISCONNECTED, id).ok) << "connection " << i;
  } else {
    ASSERT_TRUE(events->Await(RDMA_CM_EVENT_DISCONNECTED, id).ok) << "connection " << i;
    ASSERT_EQ(rdma_disconnect(id), 0) << "connection " << i << ": " << strerror(errno);
  }
}

// The active process: connects kConnections times to the port it is sent.
void Client(const Pipe& pipe) {
  uint16_t port = 0;
  ASSERT_TRUE(pipe.Recv(&port));
  rdma_event_channel* ch = NewChannel();
  ASSERT_NE(ch, nullptr);
  Events events(ch);
  sockaddr_in dst = Ipv4("127.0.0.1", port);
  ibv_pd* pd = nullptr;
  Mem mem;
  for (uint32_t i = 0; i < kConnections; ++i) {
    rdma_cm_id* id = NewResolvedId(&events, Sa(&dst));
    ASSERT_NE(id, nullptr) << "connection " << i;
    if (pd == nullptr) {
      pd = ibv_alloc_pd(id->verbs);
      ASSERT_NE(pd, nullptr);
      ASSERT_TRUE(mem.Register(pd, 2 * sizeof(Message)));
    }
    ASSERT_NE(NewQp(id, pd), nullptr) << "connection " << i;
    ASSERT_EQ(PostRecv(id->qp, &mem, sizeof(Message), sizeof(Message)), 0);
    rdma_conn_param param = DefaultConnParam();
    ASSERT_EQ(rdma_connect(id, &param), 0) << "connection " << i << ": " << strerror(errno);
    ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, id).ok) << "connection " << i;
    Message request{kRequestMagic, i};
    std::memcpy(mem.buf.data(), &request, sizeof(request));
    ASSERT_EQ(PostSend(id->qp, &mem, 0, sizeof(request)), 0);
    ASSERT_TRUE(ExpectCompletion(id->send_cq, IBV_WC_SEND)) << "connection " << i;
    ibv_wc wc{};
    ASSERT_TRUE(ExpectCompletion(id->recv_cq, IBV_WC_RECV, &wc)) << "connection " << i;
    Message reply;
    std::memcpy(&reply, mem.buf.data() + sizeof(Message), sizeof(reply));
    ASSERT_EQ(wc.byte_len, sizeof(reply));
    ASSERT_EQ(reply.magic, kReplyMagic) << "connection " << i;
    ASSERT_EQ(reply.index, i);
    Disconnect(&events, id, ActiveDisconnects(i), i);
    if (::testing::Test::HasFatalFailure()) return;
    rdma_destroy_qp(id);
    events.Forget(id);
    ASSERT_EQ(rdma_destroy_id(id), 0);
  }
  ASSERT_TRUE(pipe.Send(kConnections));
  ibv_dealloc_pd(pd);
  rdma_destroy_event_channel(ch);
}

TEST(CmManyConnections, HundredConnectionsAcceptedInALoopMoveDataAndDisconnect) {
  ScenarioOptions options;
  options.timeout_ms = 50000;
  RunScenario(options, [] {
    std::unique_ptr<Peer> client = StartPeer(Client);
    ASSERT_GT(client->pid, 0);
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    Events events(ch);
    sockaddr_in addr = Ipv4("127.0.0.1", 0);
    rdma_cm_id* listener = NewListener(ch, Sa(&addr), RDMA_PS_TCP, 8);
    ASSERT_NE(listener, nullptr);
    ibv_pd* pd = ibv_alloc_pd(listener->verbs);
    ASSERT_NE(pd, nullptr);
    Mem mem;
    ASSERT_TRUE(mem.Register(pd, 2 * sizeof(Message)));
    ASSERT_TRUE(client->pipe.Send(SrcPort(listener)));
    for (uint32_t i = 0; i < kConnections; ++i) {
      Event req = events.Await(RDMA_CM_EVENT_CONNECT_REQUEST, nullptr);
      ASSERT_TRUE(req.ok) << "connection " << i;
      EXPECT_EQ(req.listen_id, listener);
      rdma_cm_id* id = req.id;
      ASSERT_NE(NewQp(id, pd), nullptr) << "connection " << i;
      ASSERT_EQ(PostRecv(id->qp, &mem, 0, sizeof(Message)), 0);
      rdma_conn_param param = DefaultConnParam();
      ASSERT_EQ(rdma_accept(id, &param), 0) << "connection " << i << ": " << strerror(errno);
      ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, id).ok) << "connection " << i;
      ibv_wc wc{};
      ASSERT_TRUE(ExpectCompletion(id->recv_cq, IBV_WC_RECV, &wc)) << "connection " << i;
      Message request;
      std::memcpy(&request, mem.buf.data(), sizeof(request));
      ASSERT_EQ(wc.byte_len, sizeof(request));
      ASSERT_EQ(request.magic, kRequestMagic) << "connection " << i;
      ASSERT_EQ(request.index, i);
      Message reply{kReplyMagic, i};
      std::memcpy(mem.buf.data() + sizeof(Message), &reply, sizeof(reply));
      ASSERT_EQ(PostSend(id->qp, &mem, sizeof(Message), sizeof(reply)), 0);
      ASSERT_TRUE(ExpectCompletion(id->send_cq, IBV_WC_SEND)) << "connection " << i;
      Disconnect(&events, id, !ActiveDisconnects(i), i);
      if (::testing::Test::HasFatalFailure()) return;
      rdma_destroy_qp(id);
      events.Forget(id);
      ASSERT_EQ(rdma_destroy_id(id), 0);
    }
    uint32_t done = 0;
    ASSERT_TRUE(client->pipe.Recv(&done));
    EXPECT_EQ(done, kConnections);
    client->ExpectClean();
    EXPECT_EQ(rdma_destroy_id(listener), 0);
    ibv_dealloc_pd(pd);
    rdma_destroy_event_channel(ch);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
