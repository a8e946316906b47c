// Unreliable Datagram and address handles through the public API: the
// 40-byte GRH area byte by byte, the reply path through
// ibv_create_ah_from_wc, Q_Key checks, the MTU limit, AH rules, and two
// processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "datagram_fixture.h"

namespace softrdma::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kMtu = 4096;

class UdTest : public ::testing::Test {
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
    src.resize(kMtu + 64);
    dst.resize(2 * (kMtu + kGrh));
    smr = ibv_reg_mr(pd, src.data(), src.size(), 0);
    dmr = ibv_reg_mr(pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(smr && dmr);
  }
  void TearDown() override {
    if (ah) {
      EXPECT_EQ(ibv_destroy_ah(ah), 0);
    }
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (smr) ibv_dereg_mr(smr);
    if (dmr) ibv_dereg_mr(dmr);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  ibv_cq *cq_a = nullptr, *cq_b = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  ibv_ah* ah = nullptr;
  std::vector<uint8_t> src, dst;
  ibv_mr *smr = nullptr, *dmr = nullptr;
};

TEST_F(UdTest, GrhAreaAndCompletion) {
  const uint32_t len = 100;
  for (uint32_t i = 0; i < len; ++i) src[i] = static_cast<uint8_t>(i ^ 0x5a);
  memset(dst.data(), 0xee, dst.size());
  ASSERT_EQ(PostRecvTo(b, 7, Sge(dst.data(), kGrh + len, dmr)), 0);
  ASSERT_EQ(PostUdSend(a, 8, Sge(src.data(), len, smr), ah, b->qp_num, kQkey, IBV_WR_SEND_WITH_IMM,
                       0xabcd),
            0);
  auto s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  const ibv_wc& wc = r[0];
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, kGrh + len);
  EXPECT_EQ(wc.src_qp, a->qp_num);
  EXPECT_EQ(wc.qp_num, b->qp_num);
  EXPECT_EQ(wc.pkey_index, 0);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xabcdu);
  // RoCE has no SL: `sl` carries the packet type as mlx5 reports it, which
  // UCX's ud_verbs reads (sl & 7 == 2: IPv4) to find the destination address
  // in the GRH area; with 0 it dropped every datagram.
  EXPECT_EQ(wc.sl, 0x8 | 0x2) << "RoCE v2 (UDP), IPv4 header";
  // 20 zero bytes, then the IPv4 header of the datagram.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(dst[i], 0) << "byte " << i;
  const uint8_t* ip = &dst[20];
  EXPECT_EQ(ip[0], 0x45) << "IPv4, 20-byte header";
  const uint32_t udp = 8 + 12 + 8 + 4 + 100 + 4;  // UDP, BTH, DETH, ImmDt, payload, ICRC
  EXPECT_EQ(ip[2] << 8 | ip[3], static_cast<int>(20 + udp));
  EXPECT_EQ(ip[6], 0x40) << "DF";
  EXPECT_EQ(ip[8], 64) << "TTL = the AH's hop_limit";
  EXPECT_EQ(ip[9], 17) << "UDP";
  const uint8_t lo[4] = {127, 0, 0, 1};
  EXPECT_EQ(memcmp(ip + 12, lo, 4), 0) << "source address";
  EXPECT_EQ(memcmp(ip + 16, lo, 4), 0) << "destination address";
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu) << "valid header checksum";
  EXPECT_EQ(memcmp(&dst[kGrh], src.data(), len), 0) << "payload after the GRH area";
  EXPECT_EQ(dst[kGrh + len], 0xee) << "nothing written past the message";
}

// The common receive (one SGE) takes a path of its own (TryPlaceInline in
// transport/datagram.cpp); a WQE of several SGEs the general one. Both must
// leave the same bytes: here the GRH area itself is split between two SGEs.
TEST_F(UdTest, TwoSgeReceiveGetsTheSameBytesAsOneSge) {
  const uint32_t len = 100;
  for (uint32_t i = 0; i < len; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  memset(dst.data(), 0xee, dst.size());
  uint8_t* one = dst.data();            // one SGE: GRH area + payload
  uint8_t* first = dst.data() + 512;    // two SGEs: 30 bytes ...
  uint8_t* second = dst.data() + 1024;  // ... and the rest
  ASSERT_EQ(PostRecvTo(b, 1, Sge(one, kGrh + len, dmr)), 0);
  ibv_sge two[2] = {Sge(first, 30, dmr), Sge(second, kGrh + len - 30, dmr)};
  ibv_recv_wr wr{};
  wr.wr_id = 2;
  wr.sg_list = two;
  wr.num_sge = 2;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(b, &wr, &bad), 0);
  for (uint64_t id : {11u, 12u})
    ASSERT_EQ(PostUdSend(a, id, Sge(src.data(), len, smr), ah, b->qp_num, kQkey), 0);
  ASSERT_EQ(PollN(cq_a, 2).size(), 2u);
  auto r = PollN(cq_b, 2);
  ASSERT_EQ(r.size(), 2u);
  for (const ibv_wc& wc : r) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.byte_len, kGrh + len);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
    EXPECT_EQ(wc.sl, 0x8 | 0x2);
  }
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[1].wr_id, 2u);
  EXPECT_EQ(memcmp(first, one, 30), 0) << "GRH area, first part";
  EXPECT_EQ(memcmp(second, one + 30, kGrh + len - 30), 0) << "GRH area, rest, and payload";
  EXPECT_EQ(memcmp(one + kGrh, src.data(), len), 0);
  EXPECT_EQ(first[30], 0xee) << "nothing written past the first SGE";
}

TEST_F(UdTest, ReplyThroughAhFromWc) {
  ASSERT_EQ(PostRecvTo(b, 1, Sge(dst.data(), kGrh + 16, dmr)), 0);
  memset(src.data(), 0x31, 16);
  ASSERT_EQ(PostUdSend(a, 1, Sge(src.data(), 16, smr), ah, b->qp_num, kQkey), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  PollN(cq_a, 1);
  ibv_ah_attr attr;
  ASSERT_EQ(ibv_init_ah_from_wc(ctx, 1, &r[0], reinterpret_cast<ibv_grh*>(dst.data()), &attr), 0);
  EXPECT_EQ(attr.is_global, 1);
  EXPECT_EQ(attr.grh.sgid_index, gid);
  ibv_gid lo;
  ibv_query_gid(ctx, 1, gid, &lo);
  EXPECT_EQ(memcmp(attr.grh.dgid.raw, lo.raw, 16), 0);
  ibv_ah* reply = ibv_create_ah_from_wc(pd, &r[0], reinterpret_cast<ibv_grh*>(dst.data()), 1);
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(PostRecvTo(a, 2, Sge(dst.data() + 1000, kGrh + 16, dmr)), 0);
  memset(src.data(), 0x32, 16);
  ASSERT_EQ(PostUdSend(b, 2, Sge(src.data(), 16, smr), reply, r[0].src_qp, kQkey), 0);
  auto back = PollN(cq_a, 1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(back[0].src_qp, b->qp_num);
  EXPECT_EQ(dst[1000 + kGrh], 0x32);
  EXPECT_EQ(PollN(cq_b, 1).size(), 1u);
  EXPECT_EQ(ibv_destroy_ah(reply), 0);
  // A completion without a GRH cannot be answered on Ethernet.
  ibv_wc nogrh = r[0];
  nogrh.wc_flags = 0;
  EXPECT_EQ(ibv_create_ah_from_wc(pd, &nogrh, reinterpret_cast<ibv_grh*>(dst.data()), 1), nullptr);
}

TEST_F(UdTest, WrongQkeyIsDroppedControlledQkeyUsesOwn) {
  ASSERT_EQ(PostRecvTo(b, 1, Sge(dst.data(), kGrh + 16, dmr)), 0);
  ASSERT_EQ(PostUdSend(a, 1, Sge(src.data(), 16, smr), ah, b->qp_num, kQkey + 1), 0);
  auto s = PollN(cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << "the sender cannot know";
  EXPECT_TRUE(PollN(cq_b, 1, 200).empty()) << "Q_Key mismatch: silently dropped";
  // Bit 31 of remote_qkey: send the QP's own Q_Key (same as b's here).
  ASSERT_EQ(PostUdSend(a, 2, Sge(src.data(), 16, smr), ah, b->qp_num, 0x80000000u), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 1u);
  PollN(cq_a, 1);
}

TEST_F(UdTest, NoWqeOrShortBufferDrops) {
  ASSERT_EQ(PostUdSend(a, 1, Sge(src.data(), 16, smr), ah, b->qp_num, kQkey), 0);
  EXPECT_TRUE(PollN(cq_b, 1, 100).empty());
  // Room for the payload but not for the GRH area as well.
  ASSERT_EQ(PostRecvTo(b, 2, Sge(dst.data(), 16, dmr)), 0);
  ASSERT_EQ(PostUdSend(a, 3, Sge(src.data(), 16, smr), ah, b->qp_num, kQkey), 0);
  EXPECT_TRUE(PollN(cq_b, 1, 100).empty());
  EXPECT_EQ(PollN(cq_a, 2).size(), 2u);
}

TEST_F(UdTest, MtuLimit) {
  for (uint32_t i = 0; i < kMtu; ++i) src[i] = static_cast<uint8_t>(i * 3);
  errno = 0;
  EXPECT_EQ(PostUdSend(a, 1, Sge(src.data(), kMtu + 1, smr), ah, b->qp_num, kQkey), EINVAL)
      << "larger than the path MTU";
  ASSERT_EQ(PostRecvTo(b, 2, Sge(dst.data(), kGrh + kMtu, dmr)), 0);
  ASSERT_EQ(PostUdSend(a, 2, Sge(src.data(), kMtu, smr), ah, b->qp_num, kQkey), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].byte_len, kGrh + kMtu);
  EXPECT_EQ(memcmp(&dst[kGrh], src.data(), kMtu), 0);
  EXPECT_EQ(PostUdSend(a, 3, Sge(src.data(), 8, smr), ah, b->qp_num, kQkey, IBV_WR_RDMA_WRITE),
            EINVAL);
  EXPECT_EQ(PollN(cq_a, 1).size(), 1u);
}

TEST_F(UdTest, AhRules) {
  ibv_ah_attr at{};
  at.port_num = 1;
  at.dlid = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(pd, &at), nullptr) << "no GRH on an Ethernet port";
  EXPECT_EQ(errno, EINVAL);
  at.is_global = 1;
  at.grh.sgid_index = static_cast<uint8_t>(gid);
  ibv_query_gid(ctx, 1, gid, &at.grh.dgid);
  at.dlid = 0xc000;  // UCX's port hint: accepted and ignored
  ibv_ah* h = ibv_create_ah(pd, &at);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "AHs use the PD";
  EXPECT_EQ(ibv_destroy_ah(h), 0);
  at.grh.sgid_index = 15;  // an empty slot
  EXPECT_EQ(ibv_create_ah(pd, &at), nullptr);
}

// With IPv6 GIDs the GRH area is the IPv6 header itself.
TEST_F(UdTest, Ipv6GrhArea) {
  int v6 = -1;
  ibv_gid g6{};
  for (int i = 0; i < 16 && v6 < 0; ++i) {
    ibv_gid g;
    if (ibv_query_gid(ctx, 1, i, &g)) break;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t zero[16] = {};
    if (memcmp(g.raw, zero, 16) != 0 && memcmp(g.raw, mapped, 12) != 0) {
      v6 = i;
      g6 = g;
    }
  }
  if (v6 < 0) GTEST_SKIP() << "no IPv6 address on this host";
  ibv_ah_attr at{};
  at.is_global = 1;
  at.port_num = 1;
  at.grh.sgid_index = static_cast<uint8_t>(v6);
  at.grh.dgid = g6;
  at.grh.hop_limit = 9;
  at.grh.traffic_class = 0xa4;
  at.grh.flow_label = 0x12345;
  ibv_ah* h = ibv_create_ah(pd, &at);
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(PostRecvTo(b, 1, Sge(dst.data(), kGrh + 10, dmr)), 0);
  memset(src.data(), 0x66, 10);
  ASSERT_EQ(PostUdSend(a, 1, Sge(src.data(), 10, smr), h, b->qp_num, kQkey), 0);
  auto r = PollN(cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].byte_len, kGrh + 10);
  EXPECT_EQ(r[0].sl, 0x8 | 0x1) << "RoCE v2 (UDP), IPv6 header";
  EXPECT_EQ(dst[0], 0x6a) << "version 6, traffic class high nibble";
  EXPECT_EQ(dst[1], 0x41) << "traffic class low nibble, flow label high bits";
  EXPECT_EQ(dst[2], 0x23);
  EXPECT_EQ(dst[3], 0x45);
  EXPECT_EQ(dst[4] << 8 | dst[5], 8 + 12 + 8 + 12 + 4) << "UDP length (payload padded to 4)";
  EXPECT_EQ(dst[6], 17);
  EXPECT_EQ(dst[7], 9);
  EXPECT_EQ(memcmp(&dst[8], g6.raw, 16), 0);
  EXPECT_EQ(memcmp(&dst[24], g6.raw, 16), 0);
  EXPECT_EQ(dst[kGrh], 0x66);
  ibv_ah_attr back;
  ASSERT_EQ(ibv_init_ah_from_wc(ctx, 1, &r[0], reinterpret_cast<ibv_grh*>(dst.data()), &back), 0);
  EXPECT_EQ(back.grh.sgid_index, v6);
  EXPECT_EQ(memcmp(back.grh.dgid.raw, g6.raw, 16), 0);
  EXPECT_EQ(back.grh.flow_label, 0x12345u);
  EXPECT_EQ(back.grh.traffic_class, 0xa4);
  EXPECT_EQ(PollN(cq_a, 1).size(), 1u);
  EXPECT_EQ(ibv_destroy_ah(h), 0);
}

TEST_F(UdTest, SrqFeedsUdAndShortBufferCompletesInError) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 4;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp* c = CreateQpOfType(pd, cq_b, IBV_QPT_UD, srq);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(UdToRts(c, kQkey), 0);
  ASSERT_EQ(PostSrqRecvTo(srq, 1, Sge(dst.data(), 16, dmr)), 0);  // too small for GRH + 16
  ASSERT_EQ(PostSrqRecvTo(srq, 2, Sge(dst.data() + 100, kGrh + 16, dmr)), 0);
  memset(src.data(), 0x44, 16);
  ASSERT_EQ(PostUdSend(a, 1, Sge(src.data(), 16, smr), ah, c->qp_num, kQkey), 0);
  ASSERT_EQ(PostUdSend(a, 2, Sge(src.data(), 16, smr), ah, c->qp_num, kQkey), 0);
  auto r = PollN(cq_b, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR) << "an SRQ WQE already taken completes in error";
  EXPECT_EQ(r[1].wr_id, 2u);
  EXPECT_EQ(r[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[1].qp_num, c->qp_num);
  EXPECT_EQ(dst[100 + kGrh], 0x44);
  EXPECT_EQ(PollN(cq_a, 2).size(), 2u);
  EXPECT_EQ(ibv_destroy_qp(c), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(UdTwoProcesses, DatagramsAndReplyAcrossProcesses) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Echo server: receives 3 datagrams, checks them, answers each with its
    // bytes inverted through an AH made from the completion.
    alarm(20);
    ibv_context* ctx = OpenSoftrdma();
    if (!ctx) _exit(10);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ibv_qp* qp = CreateQpOfType(pd, cq, IBV_QPT_UD);
    if (!qp || UdToRts(qp, kQkey)) _exit(11);
    std::vector<uint8_t> buf(3 * (kGrh + 1000)), out(1000);
    ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* omr = ibv_reg_mr(pd, out.data(), out.size(), 0);
    for (int i = 0; i < 3; ++i)
      if (PostRecvTo(qp, i, Sge(&buf[i * (kGrh + 1000)], kGrh + 1000, mr))) _exit(12);
    uint32_t qpn = qp->qp_num;
    if (write(up[1], &qpn, 4) != 4) _exit(13);
    for (int i = 0; i < 3; ++i) {
      auto r = PollN(cq, 1, 10000);
      if (r.size() != 1 || r[0].status != IBV_WC_SUCCESS || r[0].byte_len != kGrh + 1000) _exit(14);
      const uint8_t* p = &buf[r[0].wr_id * (kGrh + 1000) + kGrh];
      for (uint32_t k = 0; k < 1000; ++k)
        if (p[k] != static_cast<uint8_t>(k + r[0].wr_id)) _exit(15);
      for (uint32_t k = 0; k < 1000; ++k) out[k] = static_cast<uint8_t>(~p[k]);
      ibv_ah* reply = ibv_create_ah_from_wc(
          pd, &r[0], reinterpret_cast<ibv_grh*>(&buf[r[0].wr_id * (kGrh + 1000)]), 1);
      if (!reply) _exit(16);
      if (PostUdSend(qp, 100, Sge(out.data(), 1000, omr), reply, r[0].src_qp, kQkey)) _exit(17);
      auto s = PollN(cq, 1, 10000);
      if (s.size() != 1 || s[0].status != IBV_WC_SUCCESS || s[0].wr_id != 100) _exit(18);
      ibv_destroy_ah(reply);
    }
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* scq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_cq* rcq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(UdToRts(qp, kQkey), 0);
  ibv_ah* ah = LoopbackAh(pd, ctx, gid);
  ASSERT_NE(ah, nullptr);
  uint32_t peer = 0;
  ASSERT_EQ(read(up[0], &peer, 4), 4);
  std::vector<uint8_t> msg(1000), back(3 * (kGrh + 1000));
  ibv_mr* mmr = ibv_reg_mr(pd, msg.data(), msg.size(), 0);
  ibv_mr* bmr = ibv_reg_mr(pd, back.data(), back.size(), IBV_ACCESS_LOCAL_WRITE);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(PostRecvTo(qp, i, Sge(&back[i * (kGrh + 1000)], kGrh + 1000, bmr)), 0);
  for (int i = 0; i < 3; ++i) {
    for (uint32_t k = 0; k < 1000; ++k) msg[k] = static_cast<uint8_t>(k + i);
    ASSERT_EQ(PostUdSend(qp, i, Sge(msg.data(), 1000, mmr), ah, peer, kQkey), 0);
    auto s = PollN(scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
    // The buffer is free once the send completed: the datagram was copied.
    auto r = PollN(rcq, 1, 10000);
    if (r.size() != 1u) {
      int st = 0;
      pid_t w = waitpid(child, &st, WNOHANG);
      kill(child, SIGKILL);
      waitpid(child, &st, 0);
      FAIL() << "no reply " << i << "; child exited early: " << (w == child) << " status "
             << (WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    }
    EXPECT_EQ(r[0].src_qp, peer);
    const uint8_t* p = &back[r[0].wr_id * (kGrh + 1000) + kGrh];
    for (uint32_t k = 0; k < 1000; ++k)
      ASSERT_EQ(p[k], static_cast<uint8_t>(~(k + i))) << "reply " << i << " byte " << k;
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ibv_destroy_qp(qp);
  ibv_destroy_ah(ah);
  ibv_dereg_mr(mmr);
  ibv_dereg_mr(bmr);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  close(up[0]);
  close(down[1]);
}

}  // namespace
}  // namespace softrdma::test
