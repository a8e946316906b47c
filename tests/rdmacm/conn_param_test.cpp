// Connection parameters: what rdma_connect and rdma_accept ask for shows in
// the peer's events and ends up in both QPs (ib-cm.md §4: each side's
// responder resources become its max_dest_rd_atomic, its initiator depth
// its max_rd_atomic, swapped on the way).
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// The parameters of both sides.
constexpr uint8_t kActiveResponderResources = 3;
constexpr uint8_t kActiveInitiatorDepth = 2;
constexpr uint8_t kActiveRetryCount = 5;
constexpr uint8_t kActiveRnrRetryCount = 6;
constexpr uint8_t kPassiveResponderResources = 2;
constexpr uint8_t kPassiveInitiatorDepth = 1;
constexpr uint8_t kPassiveRnrRetryCount = 4;
constexpr size_t kConnectDataLen = 10;
constexpr size_t kAcceptDataLen = 20;

// What one connection with those parameters showed.
struct Observed {
  Event request;  // CONNECT_REQUEST (passive)
  Event active_established;
  uint32_t active_qpn = 0;
  uint32_t passive_qpn = 0;
  ibv_qp_attr active_qp{};
  ibv_qp_attr passive_qp{};
  std::vector<uint8_t> connect_data;
  std::vector<uint8_t> accept_data;
};

constexpr int kQueryMask = IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MAX_QP_RD_ATOMIC |
                           IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_DEST_QPN;

// Connects in one process with the parameters above; `check` runs on what
// was seen.
void Connect(const std::function<void(const Observed&)>& check) {
  RunScenario([&check] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    ibv_device_attr device{};
    ASSERT_EQ(ibv_query_device(pair.client->verbs, &device), 0);
    ASSERT_GE(device.max_qp_rd_atom, kActiveResponderResources);
    ASSERT_GE(device.max_qp_init_rd_atom, kActiveInitiatorDepth);

    Observed seen;
    seen.connect_data.resize(kConnectDataLen);
    for (size_t i = 0; i < kConnectDataLen; ++i) seen.connect_data[i] = uint8_t(0xa0 + i);
    seen.accept_data.resize(kAcceptDataLen);
    for (size_t i = 0; i < kAcceptDataLen; ++i) seen.accept_data[i] = uint8_t(0x30 + i);

    rdma_conn_param connect{};
    connect.private_data = seen.connect_data.data();
    connect.private_data_len = uint8_t(kConnectDataLen);
    connect.responder_resources = kActiveResponderResources;
    connect.initiator_depth = kActiveInitiatorDepth;
    connect.retry_count = kActiveRetryCount;
    connect.rnr_retry_count = kActiveRnrRetryCount;
    ASSERT_EQ(rdma_connect(pair.client, &connect), 0) << strerror(errno);
    seen.request = pair.AwaitRequest();
    ASSERT_TRUE(seen.request.ok);
    ASSERT_NE(NewQp(pair.server, pair.pd), nullptr);

    rdma_conn_param accept{};
    accept.private_data = seen.accept_data.data();
    accept.private_data_len = uint8_t(kAcceptDataLen);
    accept.responder_resources = kPassiveResponderResources;
    accept.initiator_depth = kPassiveInitiatorDepth;
    accept.rnr_retry_count = kPassiveRnrRetryCount;
    ASSERT_EQ(rdma_accept(pair.server, &accept), 0) << strerror(errno);
    seen.active_established = pair.client_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.client);
    ASSERT_TRUE(seen.active_established.ok);
    ASSERT_TRUE(pair.server_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.server).ok);

    seen.active_qpn = pair.client->qp->qp_num;
    seen.passive_qpn = pair.server->qp->qp_num;
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(pair.client->qp, &seen.active_qp, kQueryMask, &init), 0);
    ASSERT_EQ(ibv_query_qp(pair.server->qp, &seen.passive_qp, kQueryMask, &init), 0);
    EXPECT_EQ(seen.active_qp.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(seen.passive_qp.qp_state, IBV_QPS_RTS);
    check(seen);
  });
}

TEST(CmConnParam, ConnectRequestCarriesTheActiveSidesParameters) {
  Connect([](const Observed& seen) {
    const rdma_conn_param& conn = seen.request.conn;
    // Seen from the passive side: what the peer will issue is what it must
    // absorb, and the other way round.
    EXPECT_EQ(conn.responder_resources, kActiveInitiatorDepth);
    EXPECT_EQ(conn.initiator_depth, kActiveResponderResources);
    EXPECT_EQ(conn.retry_count, kActiveRetryCount);
    EXPECT_EQ(conn.rnr_retry_count, kActiveRnrRetryCount);
    EXPECT_EQ(conn.qp_num, seen.active_qpn);
    EXPECT_EQ(seen.request.status, 0);
    EXPECT_NE(seen.request.listen_id, nullptr);
    // The REQ's private data after rdma_cm's header: always 56 bytes.
    ASSERT_EQ(seen.request.private_data.size(), 56u);
    EXPECT_TRUE(std::equal(seen.connect_data.begin(), seen.connect_data.end(),
                           seen.request.private_data.begin()));
    for (size_t i = kConnectDataLen; i < 56; ++i) EXPECT_EQ(seen.request.private_data[i], 0);
  });
}

TEST(CmConnParam, EstablishedCarriesTheAcceptersPrivateDataAndQpNumber) {
  Connect([](const Observed& seen) {
    const Event& e = seen.active_established;
    EXPECT_EQ(e.status, 0);
    EXPECT_EQ(e.conn.qp_num, seen.passive_qpn);
    EXPECT_EQ(e.conn.responder_resources, kPassiveInitiatorDepth);
    EXPECT_EQ(e.conn.initiator_depth, kPassiveResponderResources);
    ASSERT_EQ(e.private_data.size(), 196u);
    EXPECT_TRUE(
        std::equal(seen.accept_data.begin(), seen.accept_data.end(), e.private_data.begin()));
    for (size_t i = kAcceptDataLen; i < 196; ++i) EXPECT_EQ(e.private_data[i], 0);
  });
}

TEST(CmConnParam, QpsPointAtEachOther) {
  Connect([](const Observed& seen) {
    EXPECT_EQ(seen.active_qp.dest_qp_num, seen.passive_qpn);
    EXPECT_EQ(seen.passive_qp.dest_qp_num, seen.active_qpn);
  });
}

TEST(CmConnParam, PassiveQpGetsTheAcceptedRdAtomicLimits) {
  Connect([](const Observed& seen) {
    EXPECT_EQ(seen.passive_qp.max_dest_rd_atomic, kPassiveResponderResources);
    EXPECT_EQ(seen.passive_qp.max_rd_atomic, kPassiveInitiatorDepth);
  });
}

TEST(CmConnParam, RetryCountsAreApplied) {
  Connect([](const Observed& seen) {
    // retry_cnt: the active side's retry_count on both QPs; rnr_retry: each
    // side gets what the other asked for (REQ for the passive QP, REP for
    // the active one).
    EXPECT_EQ(seen.active_qp.retry_cnt, kActiveRetryCount);
    EXPECT_EQ(seen.passive_qp.retry_cnt, kActiveRetryCount);
    EXPECT_EQ(seen.passive_qp.rnr_retry, kActiveRnrRetryCount);
    EXPECT_EQ(seen.active_qp.rnr_retry, kPassiveRnrRetryCount);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
