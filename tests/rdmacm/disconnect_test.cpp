// rdma_disconnect by one side: DISCONNECTED on both, and TIMEWAIT_EXIT
// later on each id that is kept.
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// Disconnects from the active side (or the passive one), answers on the
// other, and waits for both sides' events.
void DisconnectFrom(bool active_first) {
  RunScenario([active_first] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_TRUE(pair.Establish());
    rdma_cm_id* first = active_first ? pair.client : pair.server;
    rdma_cm_id* second = active_first ? pair.server : pair.client;
    Events* first_events = active_first ? pair.client_events.get() : pair.server_events.get();
    Events* second_events = active_first ? pair.server_events.get() : pair.client_events.get();

    ASSERT_EQ(rdma_disconnect(first), 0) << strerror(errno);
    Event second_disconnected = second_events->Await(RDMA_CM_EVENT_DISCONNECTED, second, 1000);
    ASSERT_TRUE(second_disconnected.ok);
    EXPECT_EQ(second_disconnected.status, 0);
    // The QP of the side that disconnected is out of service.
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(first->qp, &attr, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
    // The other side answers (the DREP goes out with its rdma_disconnect).
    ASSERT_EQ(rdma_disconnect(second), 0) << strerror(errno);
    Event first_disconnected = first_events->Await(RDMA_CM_EVENT_DISCONNECTED, first, 1000);
    ASSERT_TRUE(first_disconnected.ok);
    EXPECT_EQ(first_disconnected.status, 0);
    ASSERT_EQ(ibv_query_qp(second->qp, &attr, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);

    // Both ids are kept: each leaves timewait after DISCONNECTED.
    Event first_exit = first_events->Await(RDMA_CM_EVENT_TIMEWAIT_EXIT, first, 10000);
    Event second_exit = second_events->Await(RDMA_CM_EVENT_TIMEWAIT_EXIT, second, 10000);
    ASSERT_TRUE(first_exit.ok);
    ASSERT_TRUE(second_exit.ok);
    EXPECT_GE(first_exit.at_ms, first_disconnected.at_ms);
    EXPECT_GE(second_exit.at_ms, second_disconnected.at_ms);
    // Nothing else came.
    Event extra = pair.client_events->Next(100);
    EXPECT_FALSE(extra.ok) << Describe(extra);
    extra = pair.server_events->Next(0);
    EXPECT_FALSE(extra.ok) << Describe(extra);
  });
}

TEST(CmDisconnect, ActiveSideDisconnectsBothSeeDisconnectedThenTimewaitExit) {
  DisconnectFrom(true);
}

TEST(CmDisconnect, PassiveSideDisconnectsBothSeeDisconnectedThenTimewaitExit) {
  DisconnectFrom(false);
}

TEST(CmDisconnect, DisconnectedIdCanBeDestroyedBeforeTimewaitExit) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_TRUE(pair.Establish());
    ASSERT_EQ(rdma_disconnect(pair.client), 0) << strerror(errno);
    ASSERT_TRUE(pair.server_events->Await(RDMA_CM_EVENT_DISCONNECTED, pair.server, 1000).ok);
    ASSERT_EQ(rdma_disconnect(pair.server), 0) << strerror(errno);
    ASSERT_TRUE(pair.client_events->Await(RDMA_CM_EVENT_DISCONNECTED, pair.client, 1000).ok);
    rdma_destroy_qp(pair.client);
    EXPECT_EQ(rdma_destroy_id(pair.client), 0);
    pair.client = nullptr;
    rdma_destroy_qp(pair.server);
    EXPECT_EQ(rdma_destroy_id(pair.server), 0);
    pair.server = nullptr;
    // No event comes for the destroyed ids.
    Event extra = pair.client_events->Next(1500);
    EXPECT_FALSE(extra.ok) << Describe(extra);
    extra = pair.server_events->Next(0);
    EXPECT_FALSE(extra.ok) << Describe(extra);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
