// UD (RDMA_PS_UDP): rdma_connect resolves the peer's QP by SIDR; accept
// answers with its QP number and Q_Key, reject with SIDR status 2.

#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

constexpr size_t kGrh = 40;  // the receive buffer's room for the GRH
constexpr int kSidrReject = 2;

TEST(CmUd, AcceptGivesTheQpNumberQkeyAndAUsableAddressHandle) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare(RDMA_PS_UDP));
    ASSERT_NE(NewQp(pair.client, pair.pd, IBV_QPT_UD), nullptr);
    const char request_data[] = "sidr request";
    rdma_conn_param connect{};
    connect.private_data = request_data;
    connect.private_data_len = sizeof(request_data);
    ASSERT_EQ(rdma_connect(pair.client, &connect), 0) << strerror(errno);
    Event req = pair.AwaitRequest();
    ASSERT_TRUE(req.ok);
    EXPECT_EQ(req.status, 0);
    ASSERT_GE(req.private_data.size(), sizeof(request_data));
    EXPECT_EQ(std::memcmp(req.private_data.data(), request_data, sizeof(request_data)), 0);
    ASSERT_NE(NewQp(pair.server, pair.pd, IBV_QPT_UD), nullptr);
    Mem rx;
    ASSERT_TRUE(rx.Register(pair.pd, kGrh + 64));
    ASSERT_EQ(PostRecv(pair.server->qp, &rx, 0, kGrh + 64), 0);
    const char reply_data[] = "sidr reply";
    rdma_conn_param accept{};
    accept.private_data = reply_data;
    accept.private_data_len = sizeof(reply_data);
    ASSERT_EQ(rdma_accept(pair.server, &accept), 0) << strerror(errno);

    Event e = pair.client_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.client);
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.status, 0);
    EXPECT_EQ(e.ud.qp_num, pair.server->qp->qp_num);
    EXPECT_EQ(e.ud.qkey, 0x01234567u);
    EXPECT_EQ(e.ud.qkey, uint32_t(RDMA_UDP_QKEY));
    ASSERT_GE(e.private_data.size(), sizeof(reply_data));
    EXPECT_EQ(std::memcmp(e.private_data.data(), reply_data, sizeof(reply_data)), 0);

    // A datagram through the address handle arrives.
    ibv_ah* ah = ibv_create_ah(pair.pd, &e.ud.ah_attr);
    ASSERT_NE(ah, nullptr) << strerror(errno);
    Mem tx;
    ASSERT_TRUE(tx.Register(pair.pd, 64));
    std::memcpy(tx.buf.data(), "datagram!", 9);
    ASSERT_EQ(PostSend(pair.client->qp, &tx, 0, 9, 7, ah, e.ud.qp_num, e.ud.qkey), 0);
    EXPECT_TRUE(ExpectCompletion(pair.client->send_cq, IBV_WC_SEND));
    ibv_wc wc{};
    ASSERT_TRUE(ExpectCompletion(pair.server->recv_cq, IBV_WC_RECV, &wc));
    EXPECT_EQ(wc.byte_len, kGrh + 9);
    EXPECT_EQ(wc.src_qp, pair.client->qp->qp_num);
    EXPECT_EQ(std::memcmp(rx.buf.data() + kGrh, "datagram!", 9), 0);
    EXPECT_EQ(ibv_destroy_ah(ah), 0);
  });
}

TEST(CmUd, RejectGivesUnreachableWithSidrStatus2) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare(RDMA_PS_UDP));
    ASSERT_NE(NewQp(pair.client, pair.pd, IBV_QPT_UD), nullptr);
    ASSERT_EQ(rdma_connect(pair.client, nullptr), 0) << strerror(errno);
    ASSERT_TRUE(pair.AwaitRequest().ok);
    ASSERT_EQ(rdma_reject(pair.server, nullptr, 0), 0) << strerror(errno);
    Event e = pair.client_events->Await(RDMA_CM_EVENT_UNREACHABLE, pair.client);
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.status, kSidrReject);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
