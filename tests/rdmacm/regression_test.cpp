// Cases that once failed: a connection over IPv6 loopback, the active QP's
// responder resources bounded by the REP, and libfabric's XRC connection (an
// XRC initiator QP on an RDMA_PS_TCP id).
#include <fcntl.h>

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

// libfabric's verbs provider connects XRC (FI_VERBS_PREFER_XRC=1 with
// FI_OFI_RXM_USE_SRX=1) this way: the active side attaches an XRC initiator QP
// (rdma_create_qp_ex, IBV_QPT_XRC_SEND) to an RDMA_PS_TCP id, whose type stays
// RC as in librdmacm, so the REQ asks for RC and an ordinary RC listener takes
// it; the passive side makes its own XRC target QP and XRC SRQ, moves the QP
// with rdma_init_qp_attr and accepts with its QP number. Before, the id took
// the QP's type, the REQ asked for XRC, and the listener rejected it (libfabric:
// "CM REJ private data not valid"). A SEND to the SRQ then lands.
TEST(CmRegression, XrcInitiatorQpOnATcpIdConnectsToAnRcListener) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare(RDMA_PS_TCP));
    ibv_context* ctx = pair.client->verbs;
    ibv_cq* send_cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ibv_cq* srq_cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ASSERT_NE(send_cq, nullptr);
    ASSERT_NE(srq_cq, nullptr);
    ibv_qp_init_attr_ex ini{};
    ini.qp_type = IBV_QPT_XRC_SEND;
    ini.comp_mask = IBV_QP_INIT_ATTR_PD;
    ini.pd = pair.pd;
    ini.send_cq = send_cq;
    ini.recv_cq = send_cq;
    ini.cap.max_send_wr = 16;
    ini.cap.max_send_sge = 1;
    ini.sq_sig_all = 1;
    ASSERT_EQ(rdma_create_qp_ex(pair.client, &ini), 0) << strerror(errno);
    EXPECT_EQ(pair.client->qp->qp_type, IBV_QPT_XRC_SEND);
    EXPECT_EQ(pair.client->qp_type, IBV_QPT_RC);  // the id's, from its port space

    // The passive side's XRC domain, SRQ and target QP (none on its id).
    ibv_xrcd_init_attr xa{};
    xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    xa.fd = -1;
    xa.oflags = O_CREAT;
    ibv_xrcd* xrcd = ibv_open_xrcd(ctx, &xa);
    ASSERT_NE(xrcd, nullptr) << strerror(errno);
    ibv_srq_init_attr_ex sa{};
    sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
                   IBV_SRQ_INIT_ATTR_PD;
    sa.srq_type = IBV_SRQT_XRC;
    sa.xrcd = xrcd;
    sa.cq = srq_cq;
    sa.pd = pair.pd;
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq_ex(ctx, &sa);
    ASSERT_NE(srq, nullptr) << strerror(errno);
    ibv_qp_init_attr_ex ta{};
    ta.qp_type = IBV_QPT_XRC_RECV;
    ta.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    ta.xrcd = xrcd;
    ibv_qp* tgt = ibv_create_qp_ex(ctx, &ta);
    ASSERT_NE(tgt, nullptr) << strerror(errno);

    rdma_conn_param param = DefaultConnParam();
    ASSERT_EQ(rdma_connect(pair.client, &param), 0) << strerror(errno);
    Event request = pair.AwaitRequest();
    ASSERT_TRUE(request.ok) << "no CONNECT_REQUEST at the RC listener";
    for (ibv_qp_state state : {IBV_QPS_INIT, IBV_QPS_RTR}) {
      ibv_qp_attr attr{};
      int mask = 0;
      attr.qp_state = state;
      ASSERT_EQ(rdma_init_qp_attr(pair.server, &attr, &mask), 0) << strerror(errno);
      ASSERT_EQ(ibv_modify_qp(tgt, &attr, mask), 0) << "to " << state << ": " << strerror(errno);
    }
    param.qp_num = tgt->qp_num;
    param.srq = 1;
    ASSERT_EQ(rdma_accept(pair.server, &param), 0) << strerror(errno);
    ASSERT_TRUE(pair.client_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.client).ok);
    ASSERT_TRUE(pair.server_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.server).ok);

    Mem mem;
    ASSERT_TRUE(mem.Register(pair.pd, 64));
    ibv_sge rsge{reinterpret_cast<uintptr_t>(mem.buf.data() + 32), 32, mem.mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 7;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &bad_r), 0);
    uint32_t srqn = 0;
    ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
    std::memcpy(mem.buf.data(), "over xrc", 8);
    ibv_sge ssge{reinterpret_cast<uintptr_t>(mem.buf.data()), 8, mem.mr->lkey};
    ibv_send_wr swr{};
    swr.wr_id = 8;
    swr.sg_list = &ssge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.qp_type.xrc.remote_srqn = srqn;
    ibv_send_wr* bad_s = nullptr;
    ASSERT_EQ(ibv_post_send(pair.client->qp, &swr, &bad_s), 0) << strerror(errno);
    EXPECT_TRUE(ExpectCompletion(send_cq, IBV_WC_SEND));
    ibv_wc wc{};
    EXPECT_TRUE(ExpectCompletion(srq_cq, IBV_WC_RECV, &wc));
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(std::memcmp(mem.buf.data() + 32, "over xrc", 8), 0);

    rdma_disconnect(pair.client);
    rdma_destroy_qp(pair.client);
    EXPECT_EQ(ibv_destroy_qp(tgt), 0);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
    EXPECT_EQ(ibv_destroy_cq(send_cq), 0);
    EXPECT_EQ(ibv_destroy_cq(srq_cq), 0);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
