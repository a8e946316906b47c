// Device discovery and queries, PD / MR / CQ / QP creation and their errors.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
  }
  void TearDown() override {
    if (ctx) {
      EXPECT_EQ(ibv_close_device(ctx), 0);
    }
  }
  ibv_context* ctx = nullptr;
};

TEST(DeviceList, ListsSoftrdma0) {
  int n = -1;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "softrdma0");
  EXPECT_EQ(list[1], nullptr);
  EXPECT_NE(ibv_get_device_guid(list[0]), 0u);
  EXPECT_EQ(list[0]->node_type, IBV_NODE_CA);
  ibv_free_device_list(list);
  // A NULL count is allowed (ibv_devinfo passes it).
  list = ibv_get_device_list(nullptr);
  ASSERT_NE(list, nullptr);
  ibv_free_device_list(list);
}

TEST_F(DeviceTest, QueryDeviceReportsRealLimits) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  EXPECT_NE(a.vendor_id, 0u);
  EXPECT_NE(a.vendor_id, 0x02c9u);  // not Mellanox
  EXPECT_EQ(a.phys_port_cnt, 1);
  EXPECT_GT(a.max_qp, 0);
  EXPECT_GT(a.max_qp_wr, 0);
  EXPECT_GT(a.max_sge, 0);
  EXPECT_GT(a.max_cqe, 0);
  EXPECT_GT(a.max_mr_size, 4096u);
  EXPECT_EQ(a.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_GT(a.max_srq, 0);
  EXPECT_GT(a.max_srq_wr, 0);
  EXPECT_GT(a.max_srq_sge, 0);
  EXPECT_GT(a.max_ah, 0);
  ibv_device_attr_ex ax{};
  ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &ax), 0);  // through verbs_context
  EXPECT_EQ(ax.orig_attr.max_qp, a.max_qp);
  EXPECT_EQ(ax.phys_port_cnt_ex, 1u);
}

// max_qp is a limit, not a hint: QP max_qp + 1 fails with ENOMEM (and
// destroying them all is quick: no per-QP scan of every other QP).
TEST_F(DeviceTest, MaxQpIsEnforced) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {1, 1, 1, 1, 0};
  std::vector<ibv_qp*> qps;
  qps.reserve(static_cast<size_t>(a.max_qp));
  for (int i = 0; i < a.max_qp; ++i) {
    ibv_qp* qp = ibv_create_qp(pd, &init);
    if (!qp) break;
    qps.push_back(qp);
  }
  EXPECT_EQ(qps.size(), static_cast<size_t>(a.max_qp));
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, &init), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  ASSERT_FALSE(qps.empty());
  ASSERT_EQ(ibv_destroy_qp(qps.back()), 0);  // one free again: one more fits
  qps.back() = ibv_create_qp(pd, &init);
  EXPECT_NE(qps.back(), nullptr);
  for (ibv_qp* qp : qps) {
    if (qp) {
      EXPECT_EQ(ibv_destroy_qp(qp), 0);
    }
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(DeviceTest, PortIsActiveEthernet) {
  ibv_port_attr p{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_GE(p.active_mtu, IBV_MTU_1024);
  EXPECT_GE(p.gid_tbl_len, 1);
  EXPECT_EQ(ibv_query_port(ctx, 2, &p), EINVAL);
  EXPECT_EQ(ibv_query_port(ctx, 0, &p), EINVAL);
}

TEST_F(DeviceTest, GidTableHasLoopbackAndEmptySlots) {
  int lo = LoopbackGidIndex(ctx);
  ASSERT_GE(lo, 0);
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx, 1, lo, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(e.gid_index, static_cast<uint32_t>(lo));
  ibv_port_attr p{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &p), 0);
  // The last slot is empty (16 slots, fewer addresses on a test host):
  // ibv_query_gid reads zeros, ibv_query_gid_ex says ENODATA.
  ibv_gid g;
  ASSERT_EQ(ibv_query_gid(ctx, 1, p.gid_tbl_len - 1, &g), 0);
  if (g.global.subnet_prefix == 0 && g.global.interface_id == 0) {
    EXPECT_EQ(ibv_query_gid_ex(ctx, 1, p.gid_tbl_len - 1, &e, 0), ENODATA);
  }
  EXPECT_EQ(ibv_query_gid(ctx, 1, p.gid_tbl_len, &g), EINVAL);
  // The table call returns the valid entries, or -EINVAL if they do not fit.
  std::vector<ibv_gid_entry> all(p.gid_tbl_len);
  ssize_t n = ibv_query_gid_table(ctx, all.data(), all.size(), 0);
  ASSERT_GE(n, 1);
  EXPECT_EQ(ibv_query_gid_table(ctx, all.data(), 0, 0), -EINVAL);
}

TEST_F(DeviceTest, PkeyTable) {
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xffff);
  EXPECT_NE(ibv_query_pkey(ctx, 1, 1, &pkey), 0);
  EXPECT_EQ(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)), 0);
}

TEST_F(DeviceTest, ContextFdsAreReal) {
  EXPECT_NE(fcntl(ctx->cmd_fd, F_GETFD), -1);
  EXPECT_NE(fcntl(ctx->async_fd, F_GETFD), -1);
  EXPECT_GE(ctx->num_comp_vectors, 1);
  // No async event pending: a non-blocking read says EAGAIN.
  fcntl(ctx->async_fd, F_SETFL, O_NONBLOCK);
  ibv_async_event ev;
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(DeviceTest, MemoryRegions) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  std::vector<char> buf(8192);
  ibv_mr* mr =
      ibv_reg_mr(pd, buf.data(), buf.size(),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(mr, nullptr);
  EXPECT_NE(mr->lkey, mr->rkey);
  EXPECT_EQ(mr->addr, buf.data());
  EXPECT_EQ(mr->length, buf.size());
  ibv_mr* mr2 = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr2, nullptr);
  EXPECT_NE(mr2->lkey, mr->lkey);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "MRs still use the PD";

  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL) << "remote write needs local write";
  void* gone = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  munmap(gone, 8192);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, gone, 8192, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EFAULT);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(nullptr, buf.data(), 64, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);

  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(DeviceTest, CompletionQueueArguments) {
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx, a.max_cqe + 1, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx, 4, nullptr, nullptr, ctx->num_comp_vectors), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_GE(cq->cqe, 4);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(DeviceTest, QueuePairArguments) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq);
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  QpParams p;
  p.max_send_sge = static_cast<uint32_t>(a.max_sge) + 1;
  errno = 0;
  EXPECT_EQ(CreateRcQp(pd, cq, cq, p), nullptr);
  EXPECT_EQ(errno, EINVAL);
  p = QpParams{};
  p.max_send_wr = static_cast<uint32_t>(a.max_qp_wr) + 1;
  errno = 0;
  EXPECT_EQ(CreateRcQp(pd, cq, cq, p), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RAW_PACKET;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, &ia), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP) << "raw packet QPs are not implemented";
  ia.qp_type = IBV_QPT_RC;
  ia.send_cq = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // QPNs are unique and never 0 or 1.
  ibv_qp* q1 = CreateRcQp(pd, cq, cq, QpParams{});
  ibv_qp* q2 = CreateRcQp(pd, cq, cq, QpParams{});
  ASSERT_TRUE(q1 && q2);
  EXPECT_NE(q1->qp_num, q2->qp_num);
  EXPECT_GT(q1->qp_num, 1u);
  EXPECT_EQ(ibv_destroy_cq(cq), EBUSY) << "QPs still use the CQ";
  EXPECT_EQ(ibv_destroy_qp(q1), 0);
  EXPECT_EQ(ibv_destroy_qp(q2), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(DeviceTest, ExtendedCreateReachesTheExtendedOps) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex ax{};
  ax.qp_type = IBV_QPT_RC;
  ax.send_cq = ax.recv_cq = cq;
  ax.pd = pd;
  ax.cap.max_send_wr = ax.cap.max_recv_wr = 1;
  ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ax.send_ops_flags = IBV_QP_EX_WITH_SEND;
  ibv_qp* qpx = ibv_create_qp_ex(ctx, &ax);
  ASSERT_NE(qpx, nullptr);
  EXPECT_EQ(ibv_destroy_qp(qpx), 0);
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 4;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &cx);
  ASSERT_NE(cqx, nullptr);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
  // The plain (PD-only) form goes to ibv_create_qp and works.
  ax.comp_mask = IBV_QP_INIT_ATTR_PD;
  ibv_qp* qp = ibv_create_qp_ex(ctx, &ax);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
}

}  // namespace
}  // namespace softrdma::test
