// The RoCE transport (src/transport/roce) between two QPs of this process
// over an in-process packet port with faults (fake_packet_port.h): every
// packet goes through the codec, the ICRC and the requester / responder /
// completer; the shm wire is not used (Engine::SetPacketPortForTesting).
#include <endian.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::Fill;
using testing::QpOptions;
using testing::RoceTransport;
namespace tr = transport::roce;

// SEND segmented at every path MTU, lengths around the MTU's edges.
TEST_F(RoceTransport, SendSegmentsAtEveryMtu) {
  for (ibv_mtu mtu : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096}) {
    SCOPED_TRACE(mtu);
    QpOptions o;
    o.mtu = mtu;
    MakePair(o);
    const uint32_t m = 128u << mtu;
    std::vector<uint8_t> src(70000), dst(70000);
    ibv_mr* smr = Register(src);
    ibv_mr* dmr = Register(dst);
    const uint64_t sent_before = port_->sent();
    uint64_t expected_packets = 0;
    for (uint32_t len : {0u, 1u, m - 1, m, m + 1, 3 * m + 7, 65536u}) {
      Fill(src, len);
      std::fill(dst.begin(), dst.end(), 0);
      PostRecv(b_, dmr, dst.data(), static_cast<uint32_t>(dst.size()), len);
      ASSERT_EQ(Post(a_, IBV_WR_SEND_WITH_IMM, smr, src.data(), len, len), 0);
      auto r = Wait(cq_b_, 1);
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(r[0].byte_len, len);
      EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
      EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(be32toh(r[0].imm_data), len);
      EXPECT_EQ(memcmp(src.data(), dst.data(), len), 0);
      auto s = Wait(cq_a_, 1);
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(s[0].wr_id, len);
      expected_packets += len == 0 ? 1 : (len + m - 1) / m;
    }
    // Requests, plus at least one ACK per message.
    EXPECT_GE(port_->sent() - sent_before, expected_packets + 7);
    DestroyQp(a_);
    DestroyQp(b_);
    a_ = b_ = nullptr;
  }
}

// WRITEs then a SEND over a port that drops, duplicates and reorders:
// byte-exact, every WQE completed once, in order.
TEST_F(RoceTransport, WritesSurviveLossDuplicationAndReordering) {
  QpOptions o;
  o.timeout = 10;  // ~4 ms (the engine rounds up to 1 ms at least)
  MakePair(o);
  port_->SetFaults({0.05, 0.03, 0.05, 7});
  const uint64_t retransmits_before = tr::GetCounters().retransmits.load();
  constexpr int kWrites = 100;
  constexpr uint32_t kLen = 16384;
  std::vector<uint8_t> src(kLen * kWrites), dst(kLen * kWrites), note(64), inbox(64);
  Fill(src, 3);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  ibv_mr* nmr = Register(note);
  ibv_mr* imr = Register(inbox);
  PostRecv(b_, imr, inbox.data(), 64, 999);
  for (int i = 0; i < kWrites; ++i)
    ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, smr, src.data() + i * kLen, kLen, i,
                   reinterpret_cast<uintptr_t>(dst.data()) + i * kLen, dmr->rkey),
              0);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, nmr, note.data(), 64, kWrites), 0);
  auto s = Wait(cq_a_, kWrites + 1, 60000);
  ASSERT_EQ(s.size(), size_t{kWrites + 1});
  for (int i = 0; i <= kWrites; ++i) {
    EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(s[i].wr_id, uint64_t(i));
  }
  auto r = Wait(cq_b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 999u);
  EXPECT_EQ(src, dst);
  EXPECT_GT(tr::GetCounters().retransmits.load(), retransmits_before);
  EXPECT_GT(port_->dropped(), 0u);
  // Nothing more completes later (no WQE completed twice).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(Wait(cq_a_, 1, 10).empty());
  EXPECT_TRUE(Wait(cq_b_, 1, 10).empty());
}

// The same with a port that has a readable fd: the engine's progress thread
// sleeps on it through its watcher instead of looking every millisecond.
class RoceTransportWithFd : public RoceTransport {
 protected:
  bool WithFd() const override { return true; }
};

TEST_F(RoceTransportWithFd, WritesThenSendWithLoss) {
  QpOptions o;
  o.timeout = 10;
  MakePair(o);
  port_->SetFaults({0.05, 0.03, 0.05, 3});
  constexpr int kWrites = 50;
  constexpr uint32_t kLen = 8192;
  std::vector<uint8_t> src(kLen * kWrites), dst(kLen * kWrites), inbox(64);
  Fill(src, 4);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  ibv_mr* imr = Register(inbox);
  PostRecv(b_, imr, inbox.data(), 64, 1);
  for (int i = 0; i < kWrites; ++i)
    ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, smr, src.data() + i * kLen, kLen, i,
                   reinterpret_cast<uintptr_t>(dst.data()) + i * kLen, dmr->rkey),
              0);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, smr, src.data(), 64, kWrites), 0);
  // Not polling for a while: the progress thread carries the exchange
  // (woken by the watcher), so the completions are waiting afterwards.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto s = Wait(cq_a_, kWrites + 1, 60000);
  ASSERT_EQ(s.size(), size_t{kWrites + 1});
  for (int i = 0; i <= kWrites; ++i) EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << i;
  ASSERT_EQ(Wait(cq_b_, 1).size(), 1u);
  EXPECT_EQ(src, dst);
}

// READs across several packets, and atomics, with loss and duplication:
// duplicate READs are answered again from the MR, duplicate atomics from the
// saved result (the counter shows each FETCH_ADD exactly once).
TEST_F(RoceTransport, ReadsAndAtomicsWithLoss) {
  QpOptions o;
  o.timeout = 10;
  MakePair(o);
  port_->SetFaults({0.05, 0.05, 0.03, 11});
  std::vector<uint8_t> remote(65536 + 64), local(65536 + 64);
  Fill(remote, 9);
  ibv_mr* rmr = Register(remote);
  ibv_mr* lmr = Register(local);
  uint64_t* counter = reinterpret_cast<uint64_t*>(remote.data() + 65536);
  *counter = 0;
  constexpr int kAdds = 50;
  ASSERT_EQ(Post(a_, IBV_WR_RDMA_READ, lmr, local.data(), 65536, 1,
                 reinterpret_cast<uintptr_t>(remote.data()), rmr->rkey),
            0);
  for (int i = 0; i < kAdds; ++i)
    ASSERT_EQ(Post(a_, IBV_WR_ATOMIC_FETCH_AND_ADD, lmr, local.data() + 65536, 8, 100 + i,
                   reinterpret_cast<uintptr_t>(counter), rmr->rkey, 1),
              0);
  auto s = Wait(cq_a_, kAdds + 1, 60000);
  ASSERT_EQ(s.size(), size_t{kAdds + 1});
  for (const ibv_wc& wc : s) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc.wr_id;
  EXPECT_EQ(memcmp(local.data(), remote.data(), 65536), 0);
  EXPECT_EQ(*counter, uint64_t{kAdds});
  EXPECT_GT(port_->dropped(), 0u);
  uint64_t last = 0;
  memcpy(&last, local.data() + 65536, 8);
  EXPECT_EQ(last, uint64_t{kAdds - 1});  // the original value of the last add
  // Compare-and-swap: swaps only when equal.
  port_->SetFaults({});
  ASSERT_EQ(Post(a_, IBV_WR_ATOMIC_CMP_AND_SWP, lmr, local.data() + 65536, 8, 7,
                 reinterpret_cast<uintptr_t>(counter), rmr->rkey, kAdds, 0xABCD),
            0);
  s = Wait(cq_a_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(*counter, 0xABCDu);
}

// RNR: a SEND before its receive is posted waits (rnr_retry 7 = forever);
// with rnr_retry 0 it fails with RNR_RETRY_EXC_ERR.
TEST_F(RoceTransport, RnrNakWaitsThenRetryExhausts) {
  MakePair();
  const uint64_t rnr_before = tr::GetCounters().rnr_naks_sent.load();
  std::vector<uint8_t> buf(4096), dst(4096);
  ibv_mr* mr = Register(buf);
  ibv_mr* dmr = Register(dst);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, mr, buf.data(), 3000, 1), 0);
  EXPECT_TRUE(Wait(cq_a_, 1, 20).empty());
  PostRecv(b_, dmr, dst.data(), 4096, 2);
  ASSERT_EQ(Wait(cq_b_, 1).size(), 1u);
  auto s = Wait(cq_a_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_GT(tr::GetCounters().rnr_naks_sent.load(), rnr_before);
  DestroyQp(a_);
  DestroyQp(b_);
  QpOptions o;
  o.rnr_retry = 0;
  MakePair(o);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, mr, buf.data(), 100, 5), 0);
  s = Wait(cq_a_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

// A WRITE with a wrong rkey: NAK remote access error, REM_ACCESS_ERR, the
// requester's QP in ERR and its later WQEs flushed.
TEST_F(RoceTransport, BadRkeyIsRemoteAccessError) {
  MakePair();
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = Register(buf);
  ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, mr, buf.data(), 100, 1,
                 reinterpret_cast<uintptr_t>(buf.data()), mr->rkey + 0x100),
            0);
  ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, mr, buf.data(), 100, 2,
                 reinterpret_cast<uintptr_t>(buf.data()), mr->rkey),
            0);
  auto s = Wait(cq_a_, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(s[1].status, IBV_WC_WR_FLUSH_ERR);
}

// Nobody answers: RETRY_EXC_ERR after timeout x (retry_cnt + 1).
TEST_F(RoceTransport, SilenceEndsInRetryExceeded) {
  QpOptions o;
  o.timeout = 10;
  o.retry_cnt = 2;
  MakePair(o);
  port_->SetFaults({1.0, 0, 0, 1});
  std::vector<uint8_t> buf(64);
  ibv_mr* mr = Register(buf);
  const uint64_t start = NowNs();
  ASSERT_EQ(Post(a_, IBV_WR_SEND, mr, buf.data(), 64, 1), 0);
  auto s = Wait(cq_a_, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_LT(NowNs() - start, uint64_t{2000} * 1000000);
}

// UC: a lost packet drops the rest of its message only.
TEST_F(RoceTransport, UcGapDropsOnlyThatMessage) {
  QpOptions o;
  o.type = IBV_QPT_UC;
  MakePair(o);
  // The second packet of the first message is lost.
  port_->SetDropIf([](const std::vector<uint8_t>&, uint64_t index) { return index == 1; });
  std::vector<uint8_t> src(4096), dst(8192);
  Fill(src, 5);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  PostRecv(b_, dmr, dst.data(), 4096, 1);
  PostRecv(b_, dmr, dst.data() + 4096, 4096, 2);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, smr, src.data(), 3000, 10), 0);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, smr, src.data(), 2000, 11), 0);
  auto s = Wait(cq_a_, 2);
  ASSERT_EQ(s.size(), 2u);  // UC completes once on the wire
  auto r = Wait(cq_b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 1u);  // the first WQE, reused for the second message
  EXPECT_EQ(r[0].byte_len, 2000u);
  EXPECT_EQ(memcmp(dst.data(), src.data(), 2000), 0);
  EXPECT_TRUE(Wait(cq_b_, 1, 20).empty());
}

// Malformed packets are dropped and counted by reason, never a crash.
TEST_F(RoceTransport, MalformedPacketsAreCountedAndDropped) {
  MakePair();
  tr::Counters& c = tr::GetCounters();
  ibv_gid g{};
  QueryGid(ctx_, 1, gid_, &g);
  in6_addr addr;
  memcpy(addr.s6_addr, g.raw, 16);
  roce::NetworkHeaders net;
  memcpy(net.src_gid.data(), g.raw, 16);
  memcpy(net.dst_gid.data(), g.raw, 16);
  net.ip_version = 4;
  net.udp_src_port = roce::kRoceUdpPort;
  auto packet = [&](uint8_t opcode, uint32_t qpn, uint32_t psn, size_t payload) {
    roce::TransportHeaders h{};
    h.bth.opcode = opcode;
    h.bth.dest_qp = qpn;
    h.bth.psn = psn;
    std::vector<uint8_t> pay(payload, 0x5A), out(8192);
    size_t n = 0;
    EXPECT_TRUE(roce::EncodePacket(net, h, pay, out, &n).ok());
    out.resize(n);
    return out;
  };
  const uint64_t short0 = c.drop_short, icrc0 = c.drop_bad_icrc, op0 = c.drop_unknown_opcode,
                 noqp0 = c.drop_no_qp, unsol0 = c.drop_unsolicited_response + c.drop_psn_window,
                 win0 = c.drop_psn_window + c.seq_naks_sent;
  port_->Inject({1, 2, 3}, addr, addr);
  auto bad_icrc = packet(0x04, b_->qp_num, 0xFFFFF0, 8);
  bad_icrc.back() ^= 1;
  port_->Inject(bad_icrc, addr, addr);
  auto unknown = packet(0x04, b_->qp_num, 0xFFFFF0, 8);
  unknown[0] = 0x1E;  // reserved RC opcode (the ICRC no longer matters)
  port_->Inject(unknown, addr, addr);
  port_->Inject(packet(0x04, 0xABCDE, 0xFFFFF0, 8), addr, addr);  // wrong QPN
  port_->Inject(packet(0x10, a_->qp_num, 0xFFFFF0, 8), addr,
                addr);  // READ response nobody asked for
  port_->Inject(packet(0x04, b_->qp_num, 0x123456, 8), addr, addr);  // PSN far ahead
  std::vector<uint8_t> sink(128);
  ibv_mr* mr = Register(sink);
  PostRecv(b_, mr, sink.data(), 128, 1);
  for (int i = 0; i < 50; ++i) Wait(cq_b_, 1, 1);
  EXPECT_GT(c.drop_short.load(), short0);
  EXPECT_GT(c.drop_bad_icrc.load(), icrc0);
  EXPECT_GT(c.drop_unknown_opcode.load(), op0);
  EXPECT_GT(c.drop_no_qp.load(), noqp0);
  EXPECT_GT(c.drop_unsolicited_response.load() + c.drop_psn_window.load(), unsol0);
  EXPECT_GT(c.drop_psn_window.load() + c.seq_naks_sent.load(), win0);
  // The connection still works.
  std::vector<uint8_t> msg(100, 7);
  ibv_mr* mmr = Register(msg);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, mmr, msg.data(), 100, 2), 0);
  auto r = Wait(cq_b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
}

// UD over RoCE: one packet per datagram with its DETH; the receive carries
// the 40-byte GRH area (IPv4 header at byte 20 for IPv4-mapped GIDs), the
// source QP and the RoCE v2 packet type in sl; a wrong Q_Key is dropped.
TEST_F(RoceTransport, UdDatagramsWithGrhAndQkey) {
  ibv_qp* qps[2];
  for (ibv_qp*& q : qps) {
    q = nullptr;
    CreateUdQpAtRtr(64, &q);
    ASSERT_NE(q, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ModifyQp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  a_ = qps[0];
  b_ = qps[1];
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  ah_attr.port_num = 1;
  ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_);
  ah_attr.grh.hop_limit = 64;
  QueryGid(ctx_, 1, gid_, &ah_attr.grh.dgid);
  ibv_ah* ah = CreateAh(pd_, &ah_attr);
  ASSERT_NE(ah, nullptr);
  std::vector<uint8_t> src(1024), dst(2048);
  Fill(src, 1);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  PostRecv(b_, dmr, dst.data(), 2048, 1);
  const uint64_t sent_before = port_->sent();
  for (uint32_t qkey : {0x9999u, 0x1234u}) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 1000, smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = qkey;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32(77);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud = {ah, b_->qp_num, qkey};
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(PostSend(a_, &wr, &bad), 0);
  }
  EXPECT_EQ(Wait(cq_a_, 2).size(), 2u);
  auto r = Wait(cq_b_, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(port_->sent() - sent_before, 2u);  // one packet each, no ACK
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].byte_len, 1040u);
  EXPECT_EQ(r[0].src_qp, a_->qp_num);
  EXPECT_EQ(be32toh(r[0].imm_data), 77u);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(r[0].sl, 0xA);   // RoCE v2 over IPv4
  EXPECT_EQ(dst[20], 0x45);  // the IPv4 header in the GRH area
  EXPECT_EQ(memcmp(dst.data() + 40, src.data(), 1000), 0);
  EXPECT_TRUE(Wait(cq_b_, 1, 20).empty());  // the wrong Q_Key's datagram was dropped
  DestroyQp(a_);
  DestroyQp(b_);
  a_ = b_ = nullptr;
  DestroyAh(ah);
}

// A UD QP listens on the RoCE wire from RTR on, also when it only ever
// talks over shared memory. A busy poller then looks at the idle port (two
// system calls on the real one) at most once per 20 us after its first 1024
// looks: before, every 16th ibv_poll_cq did (ibv_ud_pingpong on one host
// spent most of its waits in the kernel). The progress thread's looks (about
// one per ms here: this port has no fd to watch) are counted too.
TEST_F(RoceTransport, BusyPollerLooksAtASilentPortLessOftenTheLongerItIsSilent) {
  CreateUdQpAtRtr(16, &a_);
  ASSERT_NE(a_, nullptr);
  const uint64_t looks_before = port_->polls();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kPolls = 400000;
  ibv_wc wc;
  for (int i = 0; i < kPolls; ++i) ASSERT_EQ(PollCq(cq_b_, 1, &wc), 0);
  const uint64_t us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::steady_clock::now() - start)
                                                .count());
  const uint64_t looks = port_->polls() - looks_before;
  // A silence starts at activation, or after 1024 empty looks in a row if
  // an earlier test of this process had datagrams delivered; then a look per
  // 20 us for the first 320 us (16), one per sixteenth of the silence up to
  // 4 ms (16 ln 12.5, ~41), then one per 250 us; the progress thread's own
  // looks (us / 1000) and 16 to spare. Before: every 20 us after the 1024
  // (~2,600 in 30 ms, this loop's time at nice 19 under load).
  EXPECT_LE(looks, 1024 + 16 + 41 + us / 250 + us / 1000 + 16)
      << kPolls << " polls in " << us << " us";
}

}  // namespace
}  // namespace softrdma
