// A UD QP whose posted receive buffers the application unmapped while they
// stay registered and posted, as UCX's ud_verbs does at teardown (it frees
// its receive buffers, whose registration its cache drops only later, and
// then destroys the QP). An HCA writes datagrams that arrive meanwhile into
// the pages the registration pinned; here neither the progress thread nor
// ibv_destroy_qp may fault on them (docs/design.md "UD").
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

constexpr uint32_t kQkey = 0x22222222;
constexpr uint32_t kGrh = 40;
constexpr int kDatagrams = 8;
constexpr uint32_t kPayload = 256;

class UdUnmappedBuffer : public ::testing::Test {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    cq_a = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq_a && cq_b);
    a = CreateQpOfType(pd, cq_a, IBV_QPT_UD);
    b = CreateQpOfType(pd, cq_b, IBV_QPT_UD);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(UdToRts(a, kQkey), 0);
    ASSERT_EQ(UdToRts(b, kQkey), 0);
    ah = LoopbackAh(pd, ctx, gid);
    ASSERT_NE(ah, nullptr);
    src.assign(kPayload, 0x5a);
    smr = ibv_reg_mr(pd, src.data(), src.size(), 0);
    ASSERT_NE(smr, nullptr);
    bytes = 4 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    buffers = static_cast<uint8_t*>(p);
    rmr = ibv_reg_mr(pd, buffers, bytes, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(rmr, nullptr);
    for (int i = 0; i < kDatagrams; ++i)
      ASSERT_EQ(PostRecvTo(b, i, Sge(buffers + i * (kGrh + kPayload), kGrh + kPayload, rmr)), 0);
    // Gone from the address space, still registered and posted.
    ASSERT_EQ(munmap(buffers, bytes), 0);
  }
  void TearDown() override {
    if (ah) ibv_destroy_ah(ah);
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (rmr) {
      EXPECT_EQ(ibv_dereg_mr(rmr), 0);
    }
    if (smr) ibv_dereg_mr(smr);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  // Sends to B without polling anything: a poll of ours would drain the
  // ring and place the datagrams itself.
  void SendDatagrams() {
    for (int i = 0; i < kDatagrams; ++i)
      ASSERT_EQ(PostUdSend(a, i, Sge(src.data(), kPayload, smr), ah, b->qp_num, kQkey), 0);
  }
  void DestroyB() {
    EXPECT_EQ(ibv_destroy_qp(b), 0);
    b = nullptr;
  }

  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq *cq_a = nullptr, *cq_b = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  ibv_ah* ah = nullptr;
  std::vector<uint8_t> src;
  ibv_mr *smr = nullptr, *rmr = nullptr;
  uint8_t* buffers = nullptr;
  size_t bytes = 0;
};

// The datagrams wait in the ring when the destroy starts (unless the
// progress thread is quicker): the QP being destroyed takes none of them.
TEST_F(UdUnmappedBuffer, DestroyTakesNoDatagram) {
  SendDatagrams();
  DestroyB();
}

// The application does not poll: the progress thread places them.
TEST_F(UdUnmappedBuffer, ProgressThreadDoesNotFault) {
  SendDatagrams();
  usleep(200 * 1000);
  DestroyB();
  ibv_wc wc[kDatagrams];
  const int n = ibv_poll_cq(cq_b, kDatagrams, wc);  // B is gone: nothing is placed now
  EXPECT_GE(n, 0);
  EXPECT_LE(n, kDatagrams);
}

}  // namespace
}  // namespace softrdma::test
