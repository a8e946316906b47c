// NULL and foreign arguments to every implemented call: the documented
// error, never a crash.
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

TEST(NullArguments, ReturnDocumentedErrors) {
  errno = 0;
  EXPECT_EQ(ibv_open_device(nullptr), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(ibv_get_device_name(nullptr), nullptr);
  EXPECT_EQ(ibv_close_device(nullptr), EINVAL);
  EXPECT_EQ(ibv_alloc_pd(nullptr), nullptr);
  EXPECT_EQ(ibv_dealloc_pd(nullptr), EINVAL);
  EXPECT_EQ(ibv_dereg_mr(nullptr), EINVAL);
  EXPECT_EQ(ibv_create_comp_channel(nullptr), nullptr);
  EXPECT_EQ(ibv_destroy_comp_channel(nullptr), EINVAL);
  EXPECT_EQ(ibv_create_cq(nullptr, 4, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(ibv_destroy_cq(nullptr), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(nullptr), EINVAL);
  ibv_qp_init_attr ia{};
  errno = 0;
  EXPECT_EQ(ibv_create_qp(nullptr, &ia), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_get_cq_event(nullptr, nullptr, nullptr), -1);

  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_query_device(ctx, nullptr), EINVAL);
  EXPECT_EQ(ibv_query_gid(ctx, 1, 0, nullptr), EINVAL);
  EXPECT_EQ(ibv_query_pkey(ctx, 1, 0, nullptr), EINVAL);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp* qp = CreateRcQp(pd, cq, cq, QpParams{});
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_modify_qp(qp, nullptr, IBV_QP_STATE), EINVAL);
  ibv_qp_attr a{};
  EXPECT_EQ(ibv_query_qp(qp, &a, 0, nullptr), EINVAL);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(qp, nullptr, &bad), EINVAL);
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(qp, nullptr, &rbad), EINVAL);
  // A WR with SGEs announced but no list.
  ibv_recv_wr r{};
  r.num_sge = 1;
  ASSERT_EQ(ToInit(qp), 0);
  EXPECT_EQ(ibv_post_recv(qp, &r, &rbad), EINVAL);
  EXPECT_EQ(rbad, &r);
  ibv_wc wc;
  EXPECT_LT(ibv_poll_cq(cq, -1, &wc), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

}  // namespace
}  // namespace softrdma::test
