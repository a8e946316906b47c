// Cases that once failed: a connection over IPv6 loopback, and the active
// QP's responder resources bounded by the REP.
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// ::1 has no entry in softrdma0's GID table (no RoCE netdev holds it); the
// kernel's rdma_cm still resolves loopback destinations, and so must we
// (they travel on the IPv4 loopback GID).
TEST(CmRegression, ConnectOverIpv6Loopback) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare(RDMA_PS_TCP, "::1"));
    ASSERT_TRUE(pair.Establish());
    Mem mem;
    ASSERT_TRUE(mem.Register(pair.pd, 64));
    ASSERT_EQ(PostRecv(pair.server->qp, &mem, 32, 32), 0);
    std::memcpy(mem.buf.data(), "over ipv6", 9);
    ASSERT_EQ(PostSend(pair.client->qp, &mem, 0, 9), 0);
    EXPECT_TRUE(ExpectCompletion(pair.client->send_cq, IBV_WC_SEND));
    EXPECT_TRUE(ExpectCompletion(pair.server->recv_cq, IBV_WC_RECV));
    EXPECT_EQ(std::memcmp(mem.buf.data() + 32, "over ipv6", 9), 0);
  });
}

// ib-cm.md §4: the active QP's max_dest_rd_atomic is the REP's Initiator
// Depth (connect with 3, accept with initiator_depth 1 -> 1).
TEST(CmRegression, ActiveQpMaxDestRdAtomicIsTheRepsInitiatorDepth) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    rdma_conn_param connect{};
    connect.responder_resources = 3;
    connect.initiator_depth = 2;
    connect.retry_count = 7;
    connect.rnr_retry_count = 7;
    ASSERT_EQ(rdma_connect(pair.client, &connect), 0) << strerror(errno);
    ASSERT_TRUE(pair.AwaitRequest().ok);
    ASSERT_NE(NewQp(pair.server, pair.pd), nullptr);
    rdma_conn_param accept{};
    accept.responder_resources = 2;
    accept.initiator_depth = 1;
    accept.rnr_retry_count = 7;
    ASSERT_EQ(rdma_accept(pair.server, &accept), 0) << strerror(errno);
    ASSERT_TRUE(pair.client_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.client).ok);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(pair.client->qp, &attr,
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MAX_QP_RD_ATOMIC, &init),
              0);
    EXPECT_EQ(attr.max_rd_atomic, 2);       // REP Responder Resources
    EXPECT_EQ(attr.max_dest_rd_atomic, 1);  // REP Initiator Depth
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
