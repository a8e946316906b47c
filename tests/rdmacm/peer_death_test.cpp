// A peer process killed (SIGKILL) while connected: the survivor gets
// DISCONNECTED within a second, whichever side it was.
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

rdma_conn_param DefaultParam() {
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

// The active side in the peer: connects to the port it is sent, says 'e'
// once ESTABLISHED, and waits to be killed.
void ActivePeer(const Pipe& pipe) {
  uint16_t port = 0;
  ASSERT_TRUE(pipe.Recv(&port));
  rdma_event_channel* ch = NewChannel();
  ASSERT_NE(ch, nullptr);
  Events events(ch);
  sockaddr_in dst = Ipv4("127.0.0.1", port);
  rdma_cm_id* id = NewResolvedId(&events, Sa(&dst));
  ASSERT_NE(id, nullptr);
  ibv_pd* pd = ibv_alloc_pd(id->verbs);
  ASSERT_NE(pd, nullptr);
  ASSERT_NE(NewQp(id, pd), nullptr);
  rdma_conn_param param = DefaultParam();
  ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
  ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, id).ok);
  ASSERT_TRUE(pipe.Send('e'));
  for (;;) pause();
}

// The passive side in the peer: listens, sends its port, accepts one
// connection, says 'e' once ESTABLISHED, and waits to be killed.
void PassivePeer(const Pipe& pipe) {
  rdma_event_channel* ch = NewChannel();
  ASSERT_NE(ch, nullptr);
  Events events(ch);
  sockaddr_in addr = Ipv4("127.0.0.1", 0);
  rdma_cm_id* listener = NewListener(ch, Sa(&addr));
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(pipe.Send(SrcPort(listener)));
  Event req = events.Await(RDMA_CM_EVENT_CONNECT_REQUEST, nullptr);
  ASSERT_TRUE(req.ok);
  ibv_pd* pd = ibv_alloc_pd(req.id->verbs);
  ASSERT_NE(pd, nullptr);
  ASSERT_NE(NewQp(req.id, pd), nullptr);
  rdma_conn_param param = DefaultParam();
  ASSERT_EQ(rdma_accept(req.id, &param), 0) << strerror(errno);
  ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, req.id).ok);
  ASSERT_TRUE(pipe.Send('e'));
  for (;;) pause();
}

// Kills the connected peer and expects DISCONNECTED on `id` within a second.
void KillPeerAndExpectDisconnected(Peer* peer, Events* events, rdma_cm_id* id) {
  char established = 0;
  ASSERT_TRUE(peer->pipe.Recv(&established)) << "the peer did not get ESTABLISHED";
  ASSERT_EQ(kill(peer->pid, SIGKILL), 0);
  int64_t killed_at = NowMs();
  Event e = events->Await(RDMA_CM_EVENT_DISCONNECTED, id, 1000);
  ASSERT_TRUE(e.ok);
  EXPECT_LT(e.at_ms - killed_at, 1000);
  EXPECT_EQ(e.status, 0);
  peer->Kill();  // reaps it
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  // Answering the dead peer still works locally.
  EXPECT_EQ(rdma_disconnect(id), 0) << strerror(errno);
  ASSERT_EQ(ibv_query_qp(id->qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

TEST(CmPeerDeath, ActivePeerKilledPassiveSurvivorGetsDisconnected) {
  RunScenario([] {
    std::unique_ptr<Peer> peer = StartPeer(ActivePeer);
    ASSERT_GT(peer->pid, 0);
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    Events events(ch);
    sockaddr_in addr = Ipv4("127.0.0.1", 0);
    rdma_cm_id* listener = NewListener(ch, Sa(&addr));
    ASSERT_NE(listener, nullptr);
    ASSERT_TRUE(peer->pipe.Send(SrcPort(listener)));
    Event req = events.Await(RDMA_CM_EVENT_CONNECT_REQUEST, nullptr);
    ASSERT_TRUE(req.ok);
    ibv_pd* pd = ibv_alloc_pd(req.id->verbs);
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(NewQp(req.id, pd), nullptr);
    rdma_conn_param param = DefaultParam();
    ASSERT_EQ(rdma_accept(req.id, &param), 0) << strerror(errno);
    ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, req.id).ok);
    KillPeerAndExpectDisconnected(peer.get(), &events, req.id);
    rdma_destroy_qp(req.id);
    EXPECT_EQ(rdma_destroy_id(req.id), 0);
    EXPECT_EQ(rdma_destroy_id(listener), 0);
    ibv_dealloc_pd(pd);
    rdma_destroy_event_channel(ch);
  });
}

TEST(CmPeerDeath, PassivePeerKilledActiveSurvivorGetsDisconnected) {
  RunScenario([] {
    std::unique_ptr<Peer> peer = StartPeer(PassivePeer);
    ASSERT_GT(peer->pid, 0);
    uint16_t port = 0;
    ASSERT_TRUE(peer->pipe.Recv(&port));
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    Events events(ch);
    sockaddr_in dst = Ipv4("127.0.0.1", port);
    rdma_cm_id* id = NewResolvedId(&events, Sa(&dst));
    ASSERT_NE(id, nullptr);
    ibv_pd* pd = ibv_alloc_pd(id->verbs);
    ASSERT_NE(pd, nullptr);
    ASSERT_NE(NewQp(id, pd), nullptr);
    rdma_conn_param param = DefaultParam();
    ASSERT_EQ(rdma_connect(id, &param), 0) << strerror(errno);
    ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ESTABLISHED, id).ok);
    KillPeerAndExpectDisconnected(peer.get(), &events, id);
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    ibv_dealloc_pd(pd);
    rdma_destroy_event_channel(ch);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
