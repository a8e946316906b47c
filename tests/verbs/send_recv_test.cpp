// RC SEND / SEND_WITH_IMM / RECV through the public API, data verified.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

using SendRecv = LoopbackPair;

// Posts `d` as receive `recv_id` on `to` and `s` as send `send_id` on `from`,
// then waits for one completion on each side (receiver on cq_b, sender on
// cq_a).
void ExchangeOne(SendRecv& t, ibv_qp* from, ibv_qp* to, ibv_sge* s, ibv_sge* d, uint64_t send_id,
                 uint64_t recv_id, ibv_wc* sent, ibv_wc* received) {
  ASSERT_EQ(t.PostRecv(to, recv_id, d, 1), 0);
  ASSERT_EQ(t.PostSend(from, send_id, s, 1), 0);
  auto rw = PollN(t.cq_b, 1);
  auto sw = PollN(t.cq_a, 1);
  ASSERT_EQ(rw.size(), 1u);
  ASSERT_EQ(sw.size(), 1u);
  *received = rw[0];
  *sent = sw[0];
}

void Fill(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + 3) & 0xff);
}

// A CQ is a ring of entries: completions queued across its end come out in
// order and intact. 700 messages through 256-entry CQs, at most 3 queued at
// a time, so pushes and polls straddle the end of the array many times
// (core/cq.cpp wraps its indices by comparison, not `%`).
TEST_F(SendRecv, CompletionsKeepOrderAcrossTheCqWrap) {
  std::vector<uint64_t> src(700), dst(700, 0);
  std::iota(src.begin(), src.end(), 0x5000);
  ibv_mr* smr = Reg(src.data(), src.size() * 8);
  ibv_mr* dmr = Reg(dst.data(), dst.size() * 8);
  ASSERT_TRUE(smr && dmr);
  uint64_t next_send = 0, next_recv = 0;
  for (uint32_t i = 0; i < src.size(); ++i) {
    ibv_sge ds{reinterpret_cast<uintptr_t>(&dst[i]), 8, dmr->lkey};
    ibv_sge ss{reinterpret_cast<uintptr_t>(&src[i]), 8, smr->lkey};
    ASSERT_EQ(PostRecv(b, 1000 + i, &ds, 1), 0);
    ASSERT_EQ(PostSend(a, i, &ss, 1), 0);
    if (i % 3 != 2 && i + 1 != src.size()) continue;
    const int queued = static_cast<int>(i + 1 - next_send);
    for (const ibv_wc& wc : PollN(cq_b, queued)) {
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
      ASSERT_EQ(wc.wr_id, 1000 + next_recv);
      ASSERT_EQ(wc.byte_len, 8u);
      ++next_recv;
    }
    for (const ibv_wc& wc : PollN(cq_a, queued)) {
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
      ASSERT_EQ(wc.wr_id, next_send);
      ++next_send;
    }
  }
  EXPECT_EQ(next_send, src.size());
  EXPECT_EQ(next_recv, src.size());
  EXPECT_EQ(dst, src);
}

// Sends `len` bytes split over three source SGEs at odd offsets, received
// into three destination SGEs at other odd offsets; checks every byte.
void SendAndVerify(SendRecv& t, uint32_t len) {
  std::vector<uint8_t> src(len + 64), dst(2 * len + 100, 0xee), expect;
  Fill(src, len);
  ibv_mr* smr = t.Reg(src.data(), src.size());
  ibv_mr* dmr = t.Reg(dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(smr && dmr);
  uint32_t s1 = len / 3, s2 = len / 5, s3 = len - s1 - s2;
  ibv_sge ss[3] = {{reinterpret_cast<uintptr_t>(&src[1]), s1, smr->lkey},
                   {reinterpret_cast<uintptr_t>(&src[s1 + 7]), s2, smr->lkey},
                   {reinterpret_cast<uintptr_t>(&src[s1 + s2 + 13]), s3, smr->lkey}};
  expect.insert(expect.end(), &src[1], &src[1] + s1);
  expect.insert(expect.end(), &src[s1 + 7], &src[s1 + 7] + s2);
  expect.insert(expect.end(), &src[s1 + s2 + 13], &src[s1 + s2 + 13] + s3);
  uint32_t d1 = len / 2 + 1, d2 = 5, d3 = len + 20;  // more room than needed
  ibv_sge ds[3] = {{reinterpret_cast<uintptr_t>(&dst[3]), d1, dmr->lkey},
                   {reinterpret_cast<uintptr_t>(&dst[d1 + 11]), d2, dmr->lkey},
                   {reinterpret_cast<uintptr_t>(&dst[d1 + d2 + 17]), d3, dmr->lkey}};
  ASSERT_EQ(t.PostRecv(t.b, 77, ds, 3), 0);
  ASSERT_EQ(t.PostSend(t.a, 55, ss, 3), 0);
  auto rw = PollN(t.cq_b, 1);
  auto sw = PollN(t.cq_a, 1);
  ASSERT_EQ(rw.size(), 1u);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(rw[0].status);
  EXPECT_EQ(rw[0].wr_id, 77u);
  EXPECT_EQ(rw[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rw[0].byte_len, len);
  EXPECT_EQ(rw[0].qp_num, t.b->qp_num);
  EXPECT_EQ(rw[0].src_qp, t.a->qp_num);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].wr_id, 55u);
  EXPECT_EQ(sw[0].opcode, IBV_WC_SEND);
  // Reassemble what landed in the three receive pieces.
  std::vector<uint8_t> got;
  uint32_t left = len;
  for (auto& d : ds) {
    uint32_t take = std::min(left, d.length);
    auto* p = reinterpret_cast<uint8_t*>(d.addr);
    got.insert(got.end(), p, p + take);
    left -= take;
  }
  EXPECT_TRUE(got == expect) << "payload mismatch at length " << len;
  // Bytes around the receive pieces are untouched.
  EXPECT_EQ(dst[0], 0xee);
  EXPECT_EQ(dst[d1 + 3], 0xee);
}

TEST_F(SendRecv, ScatterGatherAcrossSizes) {
  for (uint32_t len : {3u, 17u, 100u, 2047u, 2049u, 4096u, 65537u, 1048579u}) {
    SCOPED_TRACE(len);
    SendAndVerify(*this, len);
  }
}

TEST_F(SendRecv, ZeroLengthSend) {
  ASSERT_EQ(PostRecv(b, 1, nullptr, 0), 0);
  ASSERT_EQ(PostSend(a, 2, nullptr, 0), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].byte_len, 0u);
}

TEST_F(SendRecv, ImmediateDataIsDelivered) {
  uint32_t word = 0x1234;
  uint32_t out = 0;
  ibv_mr* m1 = Reg(&word, sizeof word);
  ibv_mr* m2 = Reg(&out, sizeof out);
  ibv_sge s{reinterpret_cast<uintptr_t>(&word), 4, m1->lkey};
  ibv_sge d{reinterpret_cast<uintptr_t>(&out), 4, m2->lkey};
  ASSERT_EQ(PostRecv(b, 1, &d, 1), 0);
  ASSERT_EQ(PostSend(a, 2, &s, 1, IBV_SEND_SIGNALED, IBV_WR_SEND_WITH_IMM, 0xdeadbeef), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(rw[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(rw[0].imm_data), 0xdeadbeefu);
  EXPECT_EQ(out, 0x1234u);
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].opcode, IBV_WC_SEND);
}

TEST_F(SendRecv, InlineDataIsTakenAtPostTime) {
  char msg[40] = "inline payload, no lkey needed";
  char out[64] = {};
  ibv_mr* m = Reg(out, sizeof out);
  ibv_sge d{reinterpret_cast<uintptr_t>(out), sizeof out, m->lkey};
  ASSERT_EQ(PostRecv(b, 1, &d, 1), 0);
  ibv_sge s{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0 /* no MR */};
  ASSERT_EQ(PostSend(a, 2, &s, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  memset(msg, 'X', sizeof msg);  // the application may reuse the buffer now
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_STREQ(out, "inline payload, no lkey needed");
}

TEST_F(SendRecv, UnsignaledSendsAreRetiredSilently) {
  uint8_t buf[4] = {1, 2, 3, 4};
  uint8_t in[4 * 8] = {};
  ibv_mr* m = Reg(buf, sizeof buf);
  ibv_mr* mi = Reg(in, sizeof in);
  for (int i = 0; i < 8; ++i) {
    ibv_sge d{reinterpret_cast<uintptr_t>(&in[i * 4]), 4, mi->lkey};
    ASSERT_EQ(PostRecv(b, 100 + i, &d, 1), 0);
  }
  ibv_sge s{reinterpret_cast<uintptr_t>(buf), 4, m->lkey};
  for (int i = 0; i < 7; ++i) ASSERT_EQ(PostSend(a, i, &s, 1, 0), 0);
  ASSERT_EQ(PostSend(a, 7, &s, 1, IBV_SEND_SIGNALED), 0);
  auto rw = PollN(cq_b, 8);
  ASSERT_EQ(rw.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(rw[i].wr_id, 100u + i) << "receive order";
  auto sw = PollN(cq_a, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].wr_id, 7u);
  ibv_wc extra;
  usleep(20000);
  EXPECT_EQ(ibv_poll_cq(cq_a, 1, &extra), 0) << "unsignaled sends must not complete";
}

TEST_F(SendRecv, ManyMessagesCompleteInOrder) {
  constexpr int kCount = 200;
  std::vector<uint32_t> out(kCount), seq(kCount);
  std::iota(seq.begin(), seq.end(), 0u);
  ibv_mr* mo = Reg(out.data(), out.size() * 4);
  ibv_mr* ms = Reg(seq.data(), seq.size() * 4);
  int posted = 0, received = 0, sent = 0;
  uint64_t deadline = NowMs() + 10000;
  while ((received < kCount || sent < kCount) && NowMs() < deadline) {
    while (posted < kCount && posted - received < 32 && posted - sent < 32) {
      ibv_sge d{reinterpret_cast<uintptr_t>(&out[posted]), 4, mo->lkey};
      ASSERT_EQ(PostRecv(b, posted, &d, 1), 0);
      ibv_sge s{reinterpret_cast<uintptr_t>(&seq[posted]), 4, ms->lkey};
      ASSERT_EQ(PostSend(a, posted, &s, 1), 0);
      ++posted;
    }
    ibv_wc wc[16];
    int n = ibv_poll_cq(cq_b, 16, wc);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS);
      ASSERT_EQ(wc[i].wr_id, static_cast<uint64_t>(received));
      ++received;
    }
    n = ibv_poll_cq(cq_a, 16, wc);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].wr_id, static_cast<uint64_t>(sent));
      ++sent;
    }
  }
  ASSERT_EQ(received, kCount);
  ASSERT_EQ(sent, kCount);
  EXPECT_TRUE(out == seq);
}

TEST_F(SendRecv, CompletionChannelDeliversEvents) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, this, ch, 0);
  ASSERT_NE(cq, nullptr);
  // A fresh QP pair on the evented CQ.
  QpParams p;
  ibv_qp* x = CreateRcQp(pd, cq, cq, p);
  ibv_qp* y = CreateRcQp(pd, cq_b, cq_b, p);
  ASSERT_TRUE(x && y);
  ASSERT_EQ(ToInit(x), 0);
  ASSERT_EQ(ToInit(y), 0);
  ASSERT_EQ(Connect(ctx, x, gid, y->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, y, gid, x->qp_num, p), 0);

  // Nothing armed, nothing pending: a non-blocking read says EAGAIN.
  int flags = fcntl(ch->fd, F_GETFL);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);

  ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
  uint32_t v = 42, got = 0;
  ibv_mr* m1 = Reg(&v, 4);
  ibv_mr* m2 = Reg(&got, 4);
  ibv_sge d{reinterpret_cast<uintptr_t>(&got), 4, m2->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &d;
  rwr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(x, &rwr, &bad), 0);
  ibv_sge s{reinterpret_cast<uintptr_t>(&v), 4, m1->lkey};
  ASSERT_EQ(PostSend(y, 9, &s, 1), 0);
  // Do not poll: the event must arrive by itself (the progress thread).
  pollfd pfd{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "no completion event within 5 s";
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(cq, 1);
  auto wcs = PollN(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(got, 42u);

  ibv_destroy_qp(x);
  ibv_destroy_qp(y);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY) << "a CQ still uses it";
  ibv_destroy_cq(cq);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// The common receive (responder.cpp's TryReceiveInline: one SGE, the
// message in the record) into a buffer of exactly the message's size, and
// every field of the completion it writes.
TEST_F(SendRecv, OneSgeReceiveOfExactSizeCompletesInFull) {
  uint64_t word = 0x1122334455667788ull, got[2] = {0, 0x5a5a};
  ibv_mr* ms = Reg(&word, sizeof word);
  ibv_mr* mr = Reg(got, sizeof got);
  ibv_sge d{reinterpret_cast<uintptr_t>(&got[0]), 8, mr->lkey};
  ibv_sge s{reinterpret_cast<uintptr_t>(&word), 8, ms->lkey};
  ibv_wc rw[1], sw[1];
  ASSERT_NO_FATAL_FAILURE(ExchangeOne(*this, a, b, &s, &d, 32, 31, sw, rw));
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].wr_id, 31u);
  EXPECT_EQ(rw[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rw[0].byte_len, 8u);
  EXPECT_EQ(rw[0].qp_num, b->qp_num);
  EXPECT_EQ(rw[0].src_qp, a->qp_num);
  EXPECT_EQ(rw[0].wc_flags, 0u);
  EXPECT_EQ(rw[0].vendor_err, 0u);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].wr_id, 32u);
  EXPECT_EQ(sw[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(sw[0].byte_len, 8u);
  EXPECT_EQ(sw[0].qp_num, a->qp_num);
  EXPECT_EQ(got[0], word);
  EXPECT_EQ(got[1], 0x5a5au);  // nothing past the buffer
}

// A message that the first SGE of a receive cannot hold alone goes on into
// the second (not the one-SGE path).
TEST_F(SendRecv, ReceiveSpillsIntoTheSecondSge) {
  uint8_t out[12], in[32];
  for (int i = 0; i < 12; ++i) out[i] = static_cast<uint8_t>(0x40 + i);
  memset(in, 0xee, sizeof in);
  ibv_mr* mo = Reg(out, sizeof out);
  ibv_mr* mi = Reg(in, sizeof in);
  ibv_sge d[2] = {{reinterpret_cast<uintptr_t>(&in[0]), 5, mi->lkey},
                  {reinterpret_cast<uintptr_t>(&in[16]), 16, mi->lkey}};
  ibv_sge s{reinterpret_cast<uintptr_t>(out), 12, mo->lkey};
  ASSERT_EQ(PostRecv(b, 1, d, 2), 0);
  ASSERT_EQ(PostSend(a, 2, &s, 1), 0);
  auto rw = PollN(cq_b, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].byte_len, 12u);
  EXPECT_EQ(memcmp(in, out, 5), 0);
  EXPECT_EQ(in[5], 0xee);
  EXPECT_EQ(memcmp(&in[16], out + 5, 7), 0);
  EXPECT_EQ(in[23], 0xee);
}

// A one-SGE receive whose lkey does not give local write access to its
// buffer (unknown key, an MR without IBV_ACCESS_LOCAL_WRITE, an MR of
// another PD): the receive completes with a local protection error, the
// sender with a remote operation error, and both QPs go to ERR.
TEST_F(SendRecv, OneSgeReceiveWithABadLkeyFailsBothSides) {
  uint64_t word = 7, in = 0;
  ibv_mr* ms = Reg(&word, sizeof word);
  ibv_mr* read_only = Reg(&in, sizeof in, 0);
  ibv_pd* other_pd = ibv_alloc_pd(ctx);
  ASSERT_NE(other_pd, nullptr);
  ibv_mr* foreign = ibv_reg_mr(other_pd, &in, sizeof in, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(foreign, nullptr);
  const uint32_t bad_keys[] = {0x00abcd00, read_only->lkey, foreign->lkey};
  for (uint32_t key : bad_keys) {
    SCOPED_TRACE(key);
    // A fresh pair each time: the failure puts both QPs in ERR.
    QpParams p;
    ibv_qp* x = CreateRcQp(pd, cq_a, cq_a, p);
    ibv_qp* y = CreateRcQp(pd, cq_b, cq_b, p);
    ASSERT_TRUE(x && y);
    ASSERT_EQ(ToInit(x), 0);
    ASSERT_EQ(ToInit(y), 0);
    ASSERT_EQ(Connect(ctx, x, gid, y->qp_num, p), 0);
    ASSERT_EQ(Connect(ctx, y, gid, x->qp_num, p), 0);
    ibv_sge d{reinterpret_cast<uintptr_t>(&in), sizeof in, key};
    ibv_sge s{reinterpret_cast<uintptr_t>(&word), sizeof word, ms->lkey};
    ibv_wc rw[1], sw[1];
    ASSERT_NO_FATAL_FAILURE(ExchangeOne(*this, x, y, &s, &d, 4, 3, sw, rw));
    EXPECT_EQ(rw[0].status, IBV_WC_LOC_PROT_ERR);
    EXPECT_EQ(rw[0].wr_id, 3u);
    EXPECT_EQ(sw[0].status, IBV_WC_REM_OP_ERR);
    EXPECT_EQ(sw[0].wr_id, 4u);
    EXPECT_EQ(in, 0u);
    EXPECT_EQ(ibv_destroy_qp(x), 0);
    EXPECT_EQ(ibv_destroy_qp(y), 0);
  }
  EXPECT_EQ(ibv_dereg_mr(foreign), 0);
  EXPECT_EQ(ibv_dealloc_pd(other_pd), 0);
}

// A CQ shared by two QPs and polled by two threads while the transport
// pushes to it (drains run by either poller, the sender's thread or the
// progress thread): every completion comes out exactly once, and each
// poller sees each QP's completions in posting order.
TEST_F(SendRecv, SharedCqPolledByTwoThreadsGivesEachCompletionOnce) {
  constexpr int kPerQp = 1500;
  constexpr int kWindow = 32;  // sends in flight per QP
  ibv_cq* shared = ibv_create_cq(ctx, 2 * kPerQp, nullptr, nullptr, 0);
  ASSERT_NE(shared, nullptr);
  QpParams p;
  p.max_recv_wr = kPerQp;
  ibv_qp* tx[2];
  ibv_qp* rx[2];
  for (int q = 0; q < 2; ++q) {
    tx[q] = CreateRcQp(pd, cq_a, cq_a, p);
    rx[q] = CreateRcQp(pd, cq_b, shared, p);
    ASSERT_TRUE(tx[q] && rx[q]);
    ASSERT_EQ(ToInit(tx[q]), 0);
    ASSERT_EQ(ToInit(rx[q]), 0);
    ASSERT_EQ(Connect(ctx, tx[q], gid, rx[q]->qp_num, p), 0);
    ASSERT_EQ(Connect(ctx, rx[q], gid, tx[q]->qp_num, p), 0);
  }
  std::vector<uint32_t> src(kPerQp), dst(2 * kPerQp, 0);
  std::iota(src.begin(), src.end(), 0u);
  ibv_mr* ms = Reg(src.data(), src.size() * 4);
  ibv_mr* md = Reg(dst.data(), dst.size() * 4);
  for (int q = 0; q < 2; ++q)
    for (int i = 0; i < kPerQp; ++i) {
      ibv_sge d{reinterpret_cast<uintptr_t>(&dst[q * kPerQp + i]), 4, md->lkey};
      ASSERT_EQ(PostRecv(rx[q], static_cast<uint64_t>(i), &d, 1), 0);
    }

  std::atomic<int> received{0};
  std::atomic<bool> failed{false};
  std::vector<std::pair<uint32_t, uint64_t>> seen[2];  // (qp_num, wr_id) per poller
  auto poller = [&](int me) {
    const uint64_t deadline = NowMs() + 20000;
    while (received.load() < 2 * kPerQp && NowMs() < deadline) {
      ibv_wc wc[4];
      const int n = ibv_poll_cq(shared, 4, wc);
      if (n < 0) failed = true;
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != 4) failed = true;
        seen[me].emplace_back(wc[i].qp_num, wc[i].wr_id);
      }
      received.fetch_add(n > 0 ? n : 0);
    }
  };
  std::thread p0(poller, 0), p1(poller, 1);
  int posted[2] = {0, 0}, done = 0;
  const uint64_t deadline = NowMs() + 20000;
  while (done < 2 * kPerQp && NowMs() < deadline) {
    for (int q = 0; q < 2; ++q)
      if (posted[q] < kPerQp && posted[q] - done / 2 < kWindow) {
        ibv_sge s{reinterpret_cast<uintptr_t>(&src[posted[q]]), 4, ms->lkey};
        if (PostSend(tx[q], static_cast<uint64_t>(posted[q]), &s, 1) == 0) ++posted[q];
      }
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq_a, 16, wc);
    for (int i = 0; i < n; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
    done += n > 0 ? n : 0;
  }
  p0.join();
  p1.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(done, 2 * kPerQp);
  ASSERT_EQ(received.load(), 2 * kPerQp);
  std::set<std::pair<uint32_t, uint64_t>> all;
  for (int me = 0; me < 2; ++me) {
    uint64_t next[2] = {0, 0};  // lowest wr_id this poller may see next, per QP
    for (const auto& [qpn, wr_id] : seen[me]) {
      const int q = qpn == rx[0]->qp_num ? 0 : 1;
      ASSERT_TRUE(qpn == rx[q]->qp_num);
      ASSERT_GE(wr_id, next[q]) << "poller " << me << " saw QP " << q << " out of order";
      next[q] = wr_id + 1;
      ASSERT_TRUE(all.insert({qpn, wr_id}).second) << "completion seen twice";
    }
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(2 * kPerQp));
  for (int q = 0; q < 2; ++q)
    for (int i = 0; i < kPerQp; ++i) ASSERT_EQ(dst[q * kPerQp + i], static_cast<uint32_t>(i));
  for (int q = 0; q < 2; ++q) {
    EXPECT_EQ(ibv_destroy_qp(tx[q]), 0);
    EXPECT_EQ(ibv_destroy_qp(rx[q]), 0);
  }
  EXPECT_EQ(ibv_destroy_cq(shared), 0);
}

// The next `n` async events of ctx (fewer if they do not come within
// timeout_ms), each acknowledged, while polling `drive` so that this
// process makes progress. The async fd must be non-blocking.
std::vector<ibv_async_event> NextAsyncEvents(ibv_context* ctx, ibv_cq* drive, size_t n,
                                             int timeout_ms) {
  std::vector<ibv_async_event> events;
  pollfd pfd{ctx->async_fd, POLLIN, 0};
  const uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
  while (events.size() < n && NowMs() < deadline) {
    ibv_wc wc;
    ibv_poll_cq(drive, 1, &wc);
    if (poll(&pfd, 1, 10) != 1) continue;
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx, &ev) != 0) break;
    events.push_back(ev);
    ibv_ack_async_event(&ev);
  }
  return events;
}

// A CQ that fills up loses the completions that do not fit and reports
// IBV_EVENT_CQ_ERR, once; the completions it holds stay intact. The QP whose
// completion was lost enters ERR with IBV_EVENT_QP_FATAL (a local work queue
// catastrophic error, as an HCA reports it), after it acknowledged the
// message it executed.
TEST_F(SendRecv, FullCqReportsCqErrOnceAndKeepsWhatItHolds) {
  ibv_cq* small = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(small, nullptr);
  QpParams p;
  ibv_qp* x = CreateRcQp(pd, cq_a, cq_a, p);
  ibv_qp* y = CreateRcQp(pd, cq_b, small, p);
  ASSERT_TRUE(x && y);
  ASSERT_EQ(ToInit(x), 0);
  ASSERT_EQ(ToInit(y), 0);
  ASSERT_EQ(Connect(ctx, x, gid, y->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, y, gid, x->qp_num, p), 0);
  uint32_t src[6] = {10, 11, 12, 13, 14, 15}, dst[6] = {};
  ibv_mr* ms = Reg(src, sizeof src);
  ibv_mr* md = Reg(dst, sizeof dst);
  for (int i = 0; i < 6; ++i) {
    ibv_sge d{reinterpret_cast<uintptr_t>(&dst[i]), 4, md->lkey};
    ASSERT_EQ(PostRecv(y, static_cast<uint64_t>(i), &d, 1), 0);
  }
  // Five messages: four completions fit, the fifth is lost.
  for (int i = 0; i < 5; ++i) {
    ibv_sge s{reinterpret_cast<uintptr_t>(&src[i]), 4, ms->lkey};
    ASSERT_EQ(PostSend(x, static_cast<uint64_t>(100 + i), &s, 1), 0);
  }
  // The sends complete (the responder executed and acknowledged every message).
  auto sw = PollN(cq_a, 5);
  ASSERT_EQ(sw.size(), 5u);
  for (const ibv_wc& wc : sw) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst[4], 14u);

  const int flags = fcntl(ctx->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  auto events = NextAsyncEvents(ctx, cq_a, 3, 2000);
  ASSERT_EQ(events.size(), 2u) << "CQ_ERR and QP_FATAL, and nothing for the flushed receive";
  EXPECT_EQ(events[0].event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(events[0].element.cq, small);
  EXPECT_EQ(events[1].event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(events[1].element.qp, y);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(y, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);

  auto rw = PollN(small, 6, 500);
  ASSERT_EQ(rw.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(rw[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(rw[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(rw[i].byte_len, 4u);
    EXPECT_EQ(rw[i].qp_num, y->qp_num);
  }
  EXPECT_EQ(ibv_destroy_qp(x), 0);
  EXPECT_EQ(ibv_destroy_qp(y), 0);
  EXPECT_EQ(ibv_destroy_cq(small), 0);
  ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags), 0);
}

// The requester's side: a send CQ too small for the signaled sends loses
// the fifth completion; that QP is the one that goes fatal.
TEST_F(SendRecv, FullSendCqMakesTheSendingQpFatal) {
  ibv_cq* small = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(small, nullptr);
  QpParams p;
  ibv_qp* x = CreateRcQp(pd, small, cq_a, p);
  ibv_qp* y = CreateRcQp(pd, cq_b, cq_b, p);
  ASSERT_TRUE(x && y);
  ASSERT_EQ(ToInit(x), 0);
  ASSERT_EQ(ToInit(y), 0);
  ASSERT_EQ(Connect(ctx, x, gid, y->qp_num, p), 0);
  ASSERT_EQ(Connect(ctx, y, gid, x->qp_num, p), 0);
  uint64_t src[5] = {1, 2, 3, 4, 5}, dst[5] = {};
  ibv_mr* ms = Reg(src, sizeof src);
  ibv_mr* md = Reg(dst, sizeof dst);
  for (int i = 0; i < 5; ++i) {
    ibv_sge d{reinterpret_cast<uintptr_t>(&dst[i]), 8, md->lkey};
    ASSERT_EQ(PostRecv(y, static_cast<uint64_t>(i), &d, 1), 0);
  }
  for (int i = 0; i < 5; ++i) {
    ibv_sge s{reinterpret_cast<uintptr_t>(&src[i]), 8, ms->lkey};
    ASSERT_EQ(PostSend(x, static_cast<uint64_t>(100 + i), &s, 1), 0);
  }
  auto rw = PollN(cq_b, 5);
  ASSERT_EQ(rw.size(), 5u);
  for (const ibv_wc& wc : rw) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);

  const int flags = fcntl(ctx->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  auto events = NextAsyncEvents(ctx, cq_a, 3, 2000);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(events[0].element.cq, small);
  EXPECT_EQ(events[1].event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(events[1].element.qp, x);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(x, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
  ASSERT_EQ(ibv_query_qp(y, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);  // the responder is not concerned
  EXPECT_EQ(PollN(small, 8, 200).size(), 4u);
  EXPECT_EQ(ibv_destroy_qp(x), 0);
  EXPECT_EQ(ibv_destroy_qp(y), 0);
  EXPECT_EQ(ibv_destroy_cq(small), 0);
  ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags), 0);
}

}  // namespace
}  // namespace softrdma::test
