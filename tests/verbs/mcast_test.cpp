// UD multicast through the public API: ibv_attach_mcast / ibv_detach_mcast
// argument rules, delivery to every attached QP (the sender's own included,
// unless it blocks its loopback), nothing after a detach, EBUSY from
// ibv_destroy_qp while attached, and a member in another process.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "datagram_fixture.h"
#include "process_pipes.h"

namespace softrdma::test {
namespace {

constexpr uint32_t kQkey = 0x01234567;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kMulticastQpn = 0xffffff;
constexpr uint32_t kMsg = 64;

// 239.1.2.3 as RoCEv2 carries an IPv4 group: ::ffff:239.1.2.3.
ibv_gid Ipv4Group(uint8_t last) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 239;
  g.raw[13] = 1;
  g.raw[14] = 2;
  g.raw[15] = last;
  return g;
}

ibv_gid Ipv6Group() {
  ibv_gid g{};
  g.raw[0] = 0xff;
  g.raw[1] = 0x0e;
  g.raw[15] = 0x42;
  return g;
}

class McastTest : public ::testing::Test {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    ASSERT_GE(gid, 0);
    pd = ibv_alloc_pd(ctx);
    ASSERT_NE(pd, nullptr);
    for (int i = 0; i < 3; ++i) {
      cq[i] = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
      ASSERT_NE(cq[i], nullptr);
      qp[i] = CreateQpOfType(pd, cq[i], IBV_QPT_UD);
      ASSERT_NE(qp[i], nullptr);
      ASSERT_EQ(UdToRts(qp[i], kQkey), 0);
    }
    buf.assign(8 * (kMsg + kGrh), 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
  }
  void TearDown() override {
    for (int i = 0; i < 3; ++i) {
      if (qp[i]) {
        ibv_detach_mcast(qp[i], &group, 0);
        EXPECT_EQ(ibv_destroy_qp(qp[i]), 0);
      }
      if (cq[i]) ibv_destroy_cq(cq[i]);
    }
    if (ah) ibv_destroy_ah(ah);
    if (mr) ibv_dereg_mr(mr);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }

  ibv_ah* GroupAh(const ibv_gid& g) {
    ibv_ah_attr a{};
    a.is_global = 1;
    a.port_num = 1;
    a.grh.dgid = g;
    a.grh.sgid_index = static_cast<uint8_t>(gid);
    a.grh.hop_limit = 1;
    return ibv_create_ah(pd, &a);
  }
  // Posts a receive for QP i into its own slot of the buffer.
  int PostRecv(int i) { return PostRecvTo(qp[i], i, Sge(Slot(i), kMsg + kGrh, mr)); }
  uint8_t* Slot(int i) { return buf.data() + static_cast<size_t>(i + 1) * (kMsg + kGrh); }
  // Sends kMsg bytes of `fill` from QP i to the group.
  int SendToGroup(int i, uint8_t fill) {
    memset(buf.data(), fill, kMsg);
    return PostUdSend(qp[i], 100, Sge(buf.data(), kMsg, mr), ah, kMulticastQpn, kQkey);
  }

  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq* cq[3] = {};
  ibv_qp* qp[3] = {};
  ibv_ah* ah = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  ibv_gid group = Ipv4Group(3);
};

TEST_F(McastTest, DeviceReportsMulticastLimits) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx, &a), 0);
  EXPECT_GT(a.max_mcast_grp, 0);
  EXPECT_GT(a.max_mcast_qp_attach, 0);
  EXPECT_GE(a.max_total_mcast_qp_attach, a.max_mcast_qp_attach);
}

TEST_F(McastTest, AttachRejectsWhatTheKernelRejects) {
  ibv_gid unicast{};
  ASSERT_EQ(ibv_query_gid(ctx, 1, gid, &unicast), 0);
  EXPECT_EQ(ibv_attach_mcast(qp[0], &unicast, 0), EINVAL);
  ibv_gid v4_unicast = Ipv4Group(3);
  v4_unicast.raw[12] = 10;  // 10.1.2.3
  EXPECT_EQ(ibv_attach_mcast(qp[0], &v4_unicast, 0), EINVAL);
  EXPECT_EQ(ibv_attach_mcast(nullptr, &group, 0), EINVAL);
  EXPECT_EQ(ibv_attach_mcast(qp[0], nullptr, 0), EINVAL);
  // Only UD QPs join groups.
  ibv_qp* rc = CreateQpOfType(pd, cq[0], IBV_QPT_RC);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(ibv_attach_mcast(rc, &group, 0), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_destroy_qp(rc), 0);
  // Detaching what was never attached.
  EXPECT_EQ(ibv_detach_mcast(qp[0], &group, 0), EINVAL);
}

TEST_F(McastTest, EveryAttachedQpReceivesOneCopyWithTheGroupInItsGrh) {
  ah = GroupAh(group);
  ASSERT_NE(ah, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(ibv_attach_mcast(qp[i], &group, 0), 0);
    ASSERT_EQ(PostRecv(i), 0);
  }
  // A second attach of the same pair succeeds and changes nothing.
  ASSERT_EQ(ibv_attach_mcast(qp[1], &group, 0), 0);
  ASSERT_EQ(SendToGroup(0, 0x5a), 0);
  auto sent = PollN(cq[0], 2, 5000);  // the send and QP 0's own copy
  ASSERT_EQ(sent.size(), 2u);
  for (int i = 0; i < 3; ++i) {
    std::vector<ibv_wc> wc = i == 0 ? sent : PollN(cq[i], 1, 5000);
    const ibv_wc* recv = nullptr;
    for (const ibv_wc& w : wc)
      if (w.opcode == IBV_WC_RECV) recv = &w;
    ASSERT_NE(recv, nullptr) << "QP " << i;
    EXPECT_EQ(recv->status, IBV_WC_SUCCESS);
    EXPECT_EQ(recv->byte_len, kMsg + kGrh);
    EXPECT_EQ(recv->src_qp, qp[0]->qp_num);
    EXPECT_TRUE(recv->wc_flags & IBV_WC_GRH);
    // The IPv4 header in the GRH area names the group as destination.
    EXPECT_EQ(memcmp(Slot(i) + 20 + 16, group.raw + 12, 4), 0) << "QP " << i;
    EXPECT_EQ(Slot(i)[kGrh], 0x5a);
    EXPECT_EQ(Slot(i)[kGrh + kMsg - 1], 0x5a);
  }
  // QP 1 attached twice but received once.
  EXPECT_TRUE(PollN(cq[1], 1, 200).empty());
}

TEST_F(McastTest, DetachedQpReceivesNothingAndOthersStillDo) {
  group = Ipv6Group();
  ah = GroupAh(group);
  ASSERT_NE(ah, nullptr);
  ASSERT_EQ(ibv_attach_mcast(qp[1], &group, 0), 0);
  ASSERT_EQ(ibv_attach_mcast(qp[2], &group, 0), 0);
  ASSERT_EQ(ibv_detach_mcast(qp[2], &group, 0), 0);
  ASSERT_EQ(PostRecv(1), 0);
  ASSERT_EQ(PostRecv(2), 0);
  ASSERT_EQ(SendToGroup(0, 0x33), 0);
  ASSERT_EQ(PollN(cq[0], 1, 5000).size(), 1u);  // the send; QP 0 is no member
  auto got = PollN(cq[1], 1, 5000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(PollN(cq[2], 1, 300).empty());
  EXPECT_TRUE(PollN(cq[0], 1, 100).empty());
}

TEST_F(McastTest, DestroyWhileAttachedIsBusy) {
  ASSERT_EQ(ibv_attach_mcast(qp[0], &group, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(qp[0]), EBUSY);
  ASSERT_EQ(ibv_detach_mcast(qp[0], &group, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(qp[0]), 0);
  qp[0] = nullptr;
}

TEST_F(McastTest, BlockSelfLoopbackKeepsTheSendersCopyAway) {
  ibv_qp_init_attr_ex a{};
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  a.pd = pd;
  a.send_cq = cq[0];
  a.recv_cq = cq[0];
  a.qp_type = IBV_QPT_UD;
  a.cap = {16, 16, 1, 1, 64};
  a.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
  ibv_qp* blocked = ibv_create_qp_ex(ctx, &a);
  ASSERT_NE(blocked, nullptr);
  ASSERT_EQ(UdToRts(blocked, kQkey), 0);
  ah = GroupAh(group);
  ASSERT_NE(ah, nullptr);
  ASSERT_EQ(ibv_attach_mcast(blocked, &group, 0), 0);
  ASSERT_EQ(ibv_attach_mcast(qp[1], &group, 0), 0);
  ASSERT_EQ(PostRecvTo(blocked, 0, Sge(Slot(0), kMsg + kGrh, mr)), 0);
  ASSERT_EQ(PostRecv(1), 0);
  memset(buf.data(), 0x77, kMsg);
  ASSERT_EQ(PostUdSend(blocked, 100, Sge(buf.data(), kMsg, mr), ah, kMulticastQpn, kQkey), 0);
  auto own = PollN(cq[0], 2, 500);
  ASSERT_EQ(own.size(), 1u);  // the send completion only
  EXPECT_EQ(own[0].opcode, IBV_WC_SEND);
  ASSERT_EQ(PollN(cq[1], 1, 5000).size(), 1u);
  EXPECT_EQ(ibv_detach_mcast(blocked, &group, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(blocked), 0);
  // Other creation flags are still refused.
  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  EXPECT_EQ(ibv_create_qp_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// A member in another process: the child attaches, tells its QPN, and
// reports what it received; the parent is no member and only sends.
TEST_F(McastTest, MemberInAnotherProcessReceives) {
  Child child = ForkChild([&](int to_parent, int from_parent) {
    ibv_context* c = OpenSoftrdma();
    ibv_pd* p = c ? ibv_alloc_pd(c) : nullptr;
    ibv_cq* q = p ? ibv_create_cq(c, 16, nullptr, nullptr, 0) : nullptr;
    ibv_qp* u = q ? CreateQpOfType(p, q, IBV_QPT_UD) : nullptr;
    std::vector<uint8_t> rb(kMsg + kGrh);
    ibv_mr* m = u ? ibv_reg_mr(p, rb.data(), rb.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
    uint32_t ready = 0;
    if (m && UdToRts(u, kQkey) == 0 && ibv_attach_mcast(u, &group, 0) == 0 &&
        PostRecvTo(u, 7, Sge(rb.data(), kMsg + kGrh, m)) == 0)
      ready = u->qp_num;
    WriteAll(to_parent, &ready, sizeof ready);
    uint8_t result[2] = {0, 0};  // completion status ok, first payload byte
    auto wc = ready ? PollN(q, 1, 5000) : std::vector<ibv_wc>{};
    if (wc.size() == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 7) result[0] = 1;
    result[1] = rb[kGrh];
    WriteAll(to_parent, result, sizeof result);
    uint8_t go;
    ReadAll(from_parent, &go, 1);
    if (u) ibv_detach_mcast(u, &group, 0);
    _exit(result[0] == 1 ? 0 : 3);
  });
  ASSERT_GT(child.pid, 0);
  uint32_t member = 0;
  ASSERT_TRUE(ReadAll(child.from_child, &member, sizeof member));
  ASSERT_NE(member, 0u);
  ah = GroupAh(group);
  ASSERT_NE(ah, nullptr);
  ASSERT_EQ(SendToGroup(0, 0xc3), 0);
  uint8_t result[2] = {};
  ASSERT_TRUE(ReadAll(child.from_child, result, sizeof result));
  EXPECT_EQ(result[0], 1);
  EXPECT_EQ(result[1], 0xc3);
  uint8_t go = 1;
  WriteAll(child.to_child, &go, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(child.from_child);
  close(child.to_child);
}

}  // namespace
}  // namespace softrdma::test
