// A peer process killed (SIGKILL) while connected: the survivor gets
// DISCONNECTED within a second, whichever side it was.
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// The active side in the peer: connects to the port it is sent, says 'e'
// once ESTABLISHED, and waits to be killed.
void ActivePeer(const Pipe& pipe) {
  uint16_t port = 0;
  ASSERT_TRUE(pipe.Recv(&port));
  sockaddr_in dst = Ipv4("127.0.0.1", port);
  ActiveSide active;
  ASSERT_TRUE(active.Prepare(Sa(&dst)));
  rdma_conn_param param = DefaultConnParam();
  ASSERT_EQ(rdma_connect(active.id, &param), 0) << strerror(errno);
  ASSERT_TRUE(active.events->Await(RDMA_CM_EVENT_ESTABLISHED, active.id).ok);
  ASSERT_TRUE(pipe.Send('e'));
  for (;;) pause();
}

// A listener on 127.0.0.1 (port chosen) on `ch`.
rdma_cm_id* LoopbackListener(rdma_event_channel* ch) {
  sockaddr_in addr = Ipv4("127.0.0.1", 0);
  return NewListener(ch, Sa(&addr));
}

// The passive side in the peer: listens, sends its port, accepts one
// connection, says 'e' once ESTABLISHED, and waits to be killed.
void PassivePeer(const Pipe& pipe) {
  rdma_event_channel* ch = NewChannel();
  ASSERT_NE(ch, nullptr);
  Events events(ch);
  rdma_cm_id* listener = LoopbackListener(ch);
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(pipe.Send(SrcPort(listener)));
  ibv_pd* pd = nullptr;
  ASSERT_NE(AcceptNext(&events, &pd), nullptr);
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
    rdma_cm_id* listener = LoopbackListener(ch);
    ASSERT_NE(listener, nullptr);
    ASSERT_TRUE(peer->pipe.Send(SrcPort(listener)));
    ibv_pd* pd = nullptr;
    rdma_cm_id* id = AcceptNext(&events, &pd);
    ASSERT_NE(id, nullptr);
    KillPeerAndExpectDisconnected(peer.get(), &events, id);
    rdma_destroy_qp(id);
    EXPECT_EQ(rdma_destroy_id(id), 0);
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
    sockaddr_in dst = Ipv4("127.0.0.1", port);
    ActiveSide active;
    ASSERT_TRUE(active.Prepare(Sa(&dst)));
    rdma_conn_param param = DefaultConnParam();
    ASSERT_EQ(rdma_connect(active.id, &param), 0) << strerror(errno);
    ASSERT_TRUE(active.events->Await(RDMA_CM_EVENT_ESTABLISHED, active.id).ok);
    KillPeerAndExpectDisconnected(peer.get(), active.events.get(), active.id);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
