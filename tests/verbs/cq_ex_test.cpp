// Extended CQs (ibv_create_cq_ex, ibv_start_poll / ibv_wc_read_*), the
// device clock, and ibv_resize_cq, through the public API.
#include <poll.h>
#include <time.h>

#include <cerrno>
#include <vector>

#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr uint64_t kAllWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

uint64_t ClockNs(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

ibv_cq_ex* CreateCqEx(ibv_context* ctx, uint32_t cqe, uint64_t wc_flags,
                      ibv_comp_channel* ch = nullptr, int* err = nullptr) {
  ibv_cq_init_attr_ex a{};
  a.cqe = cqe;
  a.channel = ch;
  a.wc_flags = wc_flags;
  errno = 0;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &a);
  if (err) *err = cq ? 0 : errno;
  return cq;
}

// A connected loopback pair whose CQs are extended CQs.
class CqEx : public LoopbackPair {
 public:
  void SetUp() override {
    ctx = OpenSoftrdma();
    ASSERT_NE(ctx, nullptr);
    gid = LoopbackGidIndex(ctx);
    pd = ibv_alloc_pd(ctx);
    xa = CreateCqEx(ctx, 256, kAllWcFlags);
    xb = CreateCqEx(ctx, 256, kAllWcFlags);
    ASSERT_TRUE(pd && xa && xb);
    cq_a = ibv_cq_ex_to_cq(xa);
    cq_b = ibv_cq_ex_to_cq(xb);
    QpParams p;
    a = CreateRcQp(pd, cq_a, cq_a, p);
    b = CreateRcQp(pd, cq_b, cq_b, p);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(ToInit(a), 0);
    ASSERT_EQ(ToInit(b), 0);
    ASSERT_EQ(Connect(ctx, a, gid, b->qp_num, p), 0);
    ASSERT_EQ(Connect(ctx, b, gid, a->qp_num, p), 0);
  }
  // Sends `n` messages of i+1 bytes with immediate 1000+i, receives posted.
  void SendN(int n, uint64_t first_id = 0) {
    src.assign(4096, 0x5a);
    dst.assign(4096, 0);
    if (!smr) smr = Reg(src.data(), src.size());
    if (!dmr) dmr = Reg(dst.data(), dst.size());
    for (int i = 0; i < n; ++i) {
      ibv_sge r{reinterpret_cast<uintptr_t>(dst.data()), 4096, dmr->lkey};
      ASSERT_EQ(PostRecv(b, first_id + i, &r, 1), 0);
    }
    for (int i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(i + 1), smr->lkey};
      ASSERT_EQ(PostSend(a, first_id + i, &s, 1, IBV_SEND_SIGNALED, IBV_WR_SEND_WITH_IMM, 1000 + i),
                0);
    }
  }
  void ConnectPair(ibv_qp* x, ibv_qp* y) {
    ASSERT_EQ(ToInit(x), 0);
    ASSERT_EQ(ToInit(y), 0);
    ASSERT_EQ(Connect(ctx, x, gid, y->qp_num, QpParams{}), 0);
    ASSERT_EQ(Connect(ctx, y, gid, x->qp_num, QpParams{}), 0);
  }
  // Polls with the extended API until `n` completions or a deadline.
  struct Got {
    uint64_t wr_id;
    ibv_wc_status status;
    ibv_wc_opcode opcode;
    uint32_t byte_len, qp_num, src_qp, slid, wc_flags;
    __be32 imm;
    uint8_t sl, dlid_path_bits;
    uint64_t ts, wall;
  };
  static std::vector<Got> PollEx(ibv_cq_ex* cq, size_t n) {
    std::vector<Got> out;
    uint64_t deadline = NowMs() + 5000;
    while (out.size() < n && NowMs() < deadline) {
      ibv_poll_cq_attr attr{};
      int rc = ibv_start_poll(cq, &attr);
      if (rc == ENOENT) continue;
      EXPECT_EQ(rc, 0);
      if (rc) break;
      do {
        out.push_back(Got{cq->wr_id, cq->status, ibv_wc_read_opcode(cq), ibv_wc_read_byte_len(cq),
                          ibv_wc_read_qp_num(cq), ibv_wc_read_src_qp(cq), ibv_wc_read_slid(cq),
                          ibv_wc_read_wc_flags(cq), ibv_wc_read_imm_data(cq), ibv_wc_read_sl(cq),
                          ibv_wc_read_dlid_path_bits(cq), ibv_wc_read_completion_ts(cq),
                          ibv_wc_read_completion_wallclock_ns(cq)});
      } while (out.size() < n && ibv_next_poll(cq) == 0);
      ibv_end_poll(cq);
    }
    return out;
  }
  ibv_cq_ex *xa = nullptr, *xb = nullptr;
  std::vector<uint8_t> src, dst;
  ibv_mr *smr = nullptr, *dmr = nullptr;
};

TEST_F(CqEx, EveryWcFieldReadsBack) {
  const uint64_t mono0 = ClockNs(CLOCK_MONOTONIC), wall0 = ClockNs(CLOCK_REALTIME);
  SendN(5);
  auto rw = PollEx(xb, 5);
  auto sw = PollEx(xa, 5);
  const uint64_t mono1 = ClockNs(CLOCK_MONOTONIC), wall1 = ClockNs(CLOCK_REALTIME);
  ASSERT_EQ(rw.size(), 5u);
  ASSERT_EQ(sw.size(), 5u);
  uint64_t prev_ts = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    const Got& g = rw[i];
    EXPECT_EQ(g.wr_id, i);
    EXPECT_EQ(g.status, IBV_WC_SUCCESS);
    EXPECT_EQ(g.opcode, IBV_WC_RECV);
    EXPECT_EQ(g.byte_len, i + 1);
    EXPECT_EQ(g.qp_num, b->qp_num);
    EXPECT_EQ(g.src_qp, a->qp_num);
    EXPECT_TRUE(g.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(g.imm), 1000 + i);
    EXPECT_EQ(g.slid, 0u);  // RoCE: no LIDs
    EXPECT_EQ(g.sl, 0);
    EXPECT_EQ(g.dlid_path_bits, 0);
    EXPECT_GE(g.ts, mono0);  // CLOCK_MONOTONIC ns
    EXPECT_LE(g.ts, mono1);
    EXPECT_GE(g.ts, prev_ts);
    prev_ts = g.ts;
    EXPECT_GE(g.wall, wall0);
    EXPECT_LE(g.wall, wall1);
    EXPECT_EQ(memcmp(dst.data(), src.data(), 5), 0);
  }
  prev_ts = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sw[i].wr_id, i);
    EXPECT_EQ(sw[i].opcode, IBV_WC_SEND);
    EXPECT_EQ(sw[i].qp_num, a->qp_num);
    EXPECT_GE(sw[i].ts, prev_ts);
    prev_ts = sw[i].ts;
  }
}

TEST_F(CqEx, StartPollOnEmptyCqIsEnoent) {
  ibv_poll_cq_attr attr{};
  EXPECT_EQ(ibv_start_poll(xa, &attr), ENOENT);
  // ENOENT released the poll session: a second start_poll does not hang.
  EXPECT_EQ(ibv_start_poll(xa, &attr), ENOENT);
  SendN(1);
  auto sw = PollEx(xa, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(ibv_start_poll(xa, &attr), ENOENT);
}

TEST_F(CqEx, PlainPollCqServesTheSameQueue) {
  SendN(4);
  std::vector<ibv_wc> first;  // ibv_poll_cq on the cast, two entries only
  for (uint64_t end = NowMs() + 5000; first.size() < 2 && NowMs() < end;) {
    ibv_wc wc;
    if (ibv_poll_cq(cq_b, 1, &wc) == 1) first.push_back(wc);
  }
  ASSERT_EQ(first.size(), 2u);
  auto rest = PollEx(xb, 2);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(first[0].wr_id, 0u);
  EXPECT_EQ(first[1].wr_id, 1u);
  EXPECT_EQ(rest[0].wr_id, 2u);
  EXPECT_EQ(rest[1].wr_id, 3u);
  EXPECT_EQ(PollN(cq_a, 4).size(), 4u);
}

TEST_F(CqEx, CompletionChannelAndNotify) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ASSERT_NE(ch, nullptr);
  int dummy = 0;
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.channel = ch;
  ca.cq_context = &dummy;
  ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  ibv_cq_ex* xc = ibv_create_cq_ex(ctx, &ca);
  ASSERT_NE(xc, nullptr);
  ibv_cq* c = ibv_cq_ex_to_cq(xc);
  ibv_qp* q = CreateRcQp(pd, c, c, QpParams{});
  ibv_qp* peer = CreateRcQp(pd, cq_b, cq_b, QpParams{});
  ASSERT_TRUE(q && peer);
  ConnectPair(q, peer);
  ASSERT_EQ(ibv_req_notify_cq(c, 0), 0);
  std::vector<uint8_t> buf(16, 3);
  ibv_mr* m = Reg(buf.data(), buf.size());
  ibv_sge s{reinterpret_cast<uintptr_t>(buf.data()), 16, m->lkey};
  ASSERT_EQ(PostRecv(peer, 1, &s, 1), 0);
  ASSERT_EQ(PostSend(q, 42, &s, 1), 0);
  pollfd pfd{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, c);
  EXPECT_EQ(ev_ctx, &dummy);
  ibv_ack_cq_events(ev_cq, 1);
  auto got = PollEx(xc, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 42u);
  EXPECT_NE(got[0].ts, 0u);
  ibv_destroy_qp(q);
  ibv_destroy_qp(peer);
  EXPECT_EQ(ibv_destroy_cq(c), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(CqEx, ResizeKeepsQueuedCompletions) {
  ibv_cq_ex* small = CreateCqEx(ctx, 4, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
  ASSERT_NE(small, nullptr);
  ibv_cq* sc = ibv_cq_ex_to_cq(small);
  ibv_qp* q = CreateRcQp(pd, cq_a, sc, QpParams{});  // receives land in the small CQ
  ibv_qp* sender = CreateRcQp(pd, cq_a, cq_a, QpParams{});
  ASSERT_TRUE(q && sender);
  ConnectPair(q, sender);

  // Separate send and receive buffers: the receives land while later sends
  // still read theirs.
  std::vector<uint8_t> buf(64, 9), rbuf(64);
  ibv_mr* m = Reg(buf.data(), buf.size());
  ibv_mr* rm = Reg(rbuf.data(), rbuf.size());
  auto send_batch = [&](int n, uint64_t first) {
    for (int i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uintptr_t>(rbuf.data()), 8, rm->lkey};
      ASSERT_EQ(PostRecv(q, first + i, &s, 1), 0);
    }
    for (int i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uintptr_t>(buf.data()), 8, m->lkey};
      ASSERT_EQ(PostSend(sender, first + i, &s, 1), 0);
    }
    // Receive completions are queued before the ACK that completes the send.
    ASSERT_EQ(PollN(cq_a, n).size(), static_cast<size_t>(n));
  };
  send_batch(3, 0);
  EXPECT_EQ(ibv_resize_cq(sc, 2), EINVAL);  // below what is queued
  EXPECT_EQ(ibv_resize_cq(sc, 0), EINVAL);
  ASSERT_EQ(ibv_resize_cq(sc, 100), 0);
  EXPECT_GE(sc->cqe, 100);
  send_batch(50, 3);  // would have overrun the old depth
  auto got = PollEx(small, 53);
  ASSERT_EQ(got.size(), 53u);
  uint64_t prev = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].wr_id, i);
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_GE(got[i].ts, prev);  // timestamps survive the move
    prev = got[i].ts;
  }
  // Shrinking an empty CQ works.
  EXPECT_EQ(ibv_resize_cq(sc, 3), 0);
  EXPECT_EQ(sc->cqe, 3);
  send_batch(3, 100);
  EXPECT_EQ(PollN(sc, 3).size(), 3u);
  ibv_destroy_qp(q);
  ibv_destroy_qp(sender);
  ibv_destroy_cq(sc);
}

TEST(CqExCreate, Validation) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int err = 0;
  EXPECT_EQ(CreateCqEx(ctx, 4, IBV_WC_EX_WITH_CVLAN, nullptr, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(CreateCqEx(ctx, 4, IBV_WC_EX_WITH_TM_INFO, nullptr, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(CreateCqEx(ctx, 4, 1ull << 40, nullptr, &err), nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(CreateCqEx(ctx, 0, 0, nullptr, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
  ibv_cq_init_attr_ex a{};
  a.cqe = 4;
  a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  a.flags = 1u << 7;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &a);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  a.comp_mask = 1u << 20;  // unknown bits
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_close_device(ctx);
}

TEST(DeviceClock, QueryDeviceExAndRtValues) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr_ex ax{};
  ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &ax), 0);
  EXPECT_EQ(ax.completion_timestamp_mask, UINT64_MAX);
  EXPECT_EQ(ax.hca_core_clock, 1000000u);  // kHz: 1 tick = 1 ns
  EXPECT_EQ(ax.phys_port_cnt_ex, 1u);
  EXPECT_EQ(ax.device_cap_flags_ex, static_cast<uint64_t>(ax.orig_attr.device_cap_flags));
  ibv_values_ex v{};
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  const uint64_t before = ClockNs(CLOCK_MONOTONIC);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
  const uint64_t after = ClockNs(CLOCK_MONOTONIC);
  EXPECT_EQ(v.comp_mask, static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK));
  const uint64_t raw = static_cast<uint64_t>(v.raw_clock.tv_sec) * 1000000000ull +
                       static_cast<uint64_t>(v.raw_clock.tv_nsec);
  EXPECT_GE(raw, before);
  EXPECT_LE(raw, after);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softrdma::test
