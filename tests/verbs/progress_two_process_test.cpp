// Progress between processes: a target whose application polls a CQ now and
// then but otherwise waits for its memory (as ib_write_lat's does) must not
// leave a two-copy RDMA WRITE in its ring until its own next poll or the
// progress thread's next look once a window (Engine::WatchPollingApplication).
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "process_pipes.h"
#include "two_process_conn.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr int kWrites = 40;
// After each WRITE lands, the target polls (an empty CQ) for this long, as
// ib_write_lat's target polls for its own WRITE's completion: so the
// progress thread sees an application that polls in every window.
constexpr uint64_t kTargetPollsForNs = 100'000;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Spins on its memory for each WRITE's value; polls its (always empty) CQ
// for a while after each one landed.
[[noreturn]] void SpinningTarget(int up, int down) {
  ChildSide side(30);
  auto& [ctx, gid, pd, c] = side;
  alignas(64) static uint64_t word = 0;
  ibv_mr* mr = ibv_reg_mr(pd, &word, sizeof word, kAllRemote);
  if (!mr) _exit(12);
  Remote mine{reinterpret_cast<uintptr_t>(&word), mr->rkey, c.qp->qp_num};
  uint32_t peer_qpn = 0;
  if (!WriteAll(up, &mine, sizeof mine) || !ReadAll(down, &peer_qpn, 4)) _exit(13);
  if (!c.Connect(ctx, gid, peer_qpn)) _exit(14);
  char ready = 'r';
  if (!WriteAll(up, &ready, 1)) _exit(15);
  const uint64_t give_up = NowNs() + 20'000'000'000ull;
  for (uint64_t expect = 1; expect <= kWrites; ++expect) {
    while (std::atomic_ref<uint64_t>(word).load(std::memory_order_acquire) < expect)
      if (NowNs() > give_up) _exit(16);
    for (const uint64_t until = NowNs() + kTargetPollsForNs; NowNs() < until;) {
      ibv_wc wc;
      if (int n = ibv_poll_cq(c.cq, 1, &wc); n != 0) {  // nothing ever completes here
        fprintf(stderr, "target: poll returned %d, status %d opcode %d\n", n, wc.status, wc.opcode);
        _exit(17);
      }
    }
  }
  char done = 'd';
  if (!WriteAll(up, &done, 1)) _exit(18);
  if (!ReadAll(down, &done, 1)) _exit(19);  // the parent's last completion arrived
  if (ibv_dereg_mr(mr) || !side.Release()) _exit(20);
  exit(0);
}

// Waits (10 s at most) for one completion of `cq`, armed on `channel`,
// blocking in the channel between polls.
bool WaitOneCompletion(ibv_comp_channel* channel, ibv_cq* cq, ibv_wc* wc) {
  for (int rounds = 0; rounds < 100; ++rounds) {
    if (int n = ibv_poll_cq(cq, 1, wc); n != 0) return n == 1;
    pollfd pfd{channel->fd, POLLIN, 0};
    if (poll(&pfd, 1, 10'000) != 1) return false;
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != 0) return false;
    ibv_ack_cq_events(ev_cq, 1);
    if (ibv_req_notify_cq(cq, 0) != 0) return false;
  }
  return false;
}

// The defect guarded: the thread watching quietly (not announced on the
// ring) sleeps until its window ends, so a WRITE left for it waits out the
// rest of the window: the first window of a watch is 1 ms, and WRITEs come
// 150 to 350 us after the last drain, so such a WRITE takes ~650 to ~1,000
// us. Once it has found a record left for it, the thread watches on the ring
// and the next commit wakes it: microseconds, plus the wait for a CPU on a
// loaded host, which is often a whole 4 ms tick. An attempt passes when at
// most kWindowWaitsAllowed WRITEs took about a window (kWindowWaitMinUs to
// kWindowWaitMaxUs) and the median is under kMedianBoundUs; up to three
// attempts, each with a fresh target (the defect shows in a watch's first
// WRITEs), so that one starved of CPU by other jobs is tried again. Measured
// at nice 0 with other jobs keeping the load at 6 to 9: with the thread kept
// quiet (on_ring never set), 11 to 36 of the 40 in that band in 10 single
// runs (medians 762 to 885 us), and the test failed 5 times in 6 (all three
// attempts); without the defect, 0 to 8 in the band in 26 single runs (one
// 8), and the test passed 8 times in 8, once at its second attempt (the
// first: median 2,374 us, WRITEs waiting 3 ms or more for a CPU, where the
// old bound, a single median under 300 us, failed). At nice 19 the quiet
// watch rarely shows (0 of 4 failed).
constexpr uint64_t kWindowWaitMinUs = 450;
constexpr uint64_t kWindowWaitMaxUs = 1300;
constexpr int kWindowWaitsAllowed = 7;  // of 40
constexpr uint64_t kMedianBoundUs = 300;

// One target process, kWrites WRITEs into its memory: their completion
// times (us) in *took_us.
void WriteToSpinningTarget(std::vector<uint64_t>* took_us) {
  Child kid = ForkChild(SpinningTarget);
  ASSERT_GT(kid.pid, 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  // The initiator sleeps while it waits (completion channel, usleep between
  // WRITEs): a CPU stays free for the target's progress thread, which is
  // what is measured, not how two spinning processes share two CPUs.
  ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  ASSERT_NE(channel, nullptr);
  Conn c;
  c.cq = ibv_create_cq(ctx, 16, nullptr, channel, 0);
  ASSERT_NE(c.cq, nullptr);
  c.qp = CreateRcQp(pd, c.cq, c.cq, QpParams{});
  ASSERT_NE(c.qp, nullptr);
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(c.qp, &init,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  Remote target{};
  ASSERT_TRUE(ReadAll(kid.from_child, &target, sizeof target));
  ASSERT_TRUE(c.Connect(ctx, gid, target.qpn));
  ASSERT_TRUE(WriteAll(kid.to_child, &c.qp->qp_num, 4));
  char ready = 0;
  ASSERT_TRUE(ReadAll(kid.from_child, &ready, 1));

  alignas(64) static uint64_t value = 0;
  ibv_mr* mr = ibv_reg_mr(pd, &value, sizeof value, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  uint32_t gap = 12345;
  for (int i = 1; i <= kWrites; ++i) {
    // 150 to 350 us apart (after the target's polls), at every phase of its
    // progress thread's windows.
    gap = gap * 1103515245u + 12345u;
    usleep(150 + (gap >> 16) % 200);
    value = static_cast<uint64_t>(i);
    ibv_sge sge{reinterpret_cast<uintptr_t>(&value), sizeof value, mr->lkey};
    const uint64_t t0 = NowNs();
    ASSERT_EQ(ibv_req_notify_cq(c.cq, 0), 0);
    ASSERT_EQ(PostOne(c.qp, IBV_WR_RDMA_WRITE, &sge, 1, target.addr, target.rkey), 0);
    ibv_wc wc{};
    ASSERT_TRUE(WaitOneCompletion(channel, c.cq, &wc));
    took_us->push_back((NowNs() - t0) / 1000);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  char done = 0;
  EXPECT_TRUE(ReadAll(kid.from_child, &done, 1) && WriteAll(kid.to_child, &done, 1));
  int st = WaitChildPolling(kid.pid, c.cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;

  ibv_dereg_mr(mr);
  ASSERT_TRUE(c.Destroy());
  ibv_destroy_comp_channel(channel);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  for (int fd : {kid.from_child, kid.to_child}) close(fd);
}

// Up to three attempts, each with a fresh target (a watch's first WRITEs
// are where the defect shows); one within the bound passes.
TEST(ProgressTwoProcesses, WriteToSpinningTargetCompletesPromptly) {
  constexpr int kAttempts = 3;
  int window_waits = 0;
  uint64_t median = 0;
  std::string all;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<uint64_t> took_us;
    ASSERT_NO_FATAL_FAILURE(WriteToSpinningTarget(&took_us));
    ASSERT_EQ(took_us.size(), static_cast<size_t>(kWrites));
    std::vector<uint64_t> sorted = took_us;
    std::sort(sorted.begin(), sorted.end());
    window_waits = 0;
    all.clear();
    for (uint64_t us : took_us) {
      all += std::to_string(us) + " ";
      if (us >= kWindowWaitMinUs && us <= kWindowWaitMaxUs) ++window_waits;
    }
    printf("WRITE completion, attempt %d: median %llu us, max %llu us, %d of %d about a window\n",
           attempt, static_cast<unsigned long long>(sorted[sorted.size() / 2]),
           static_cast<unsigned long long>(sorted.back()), window_waits, kWrites);
    fflush(stdout);  // before the next attempt forks a child
    median = sorted[sorted.size() / 2];
    if (window_waits <= kWindowWaitsAllowed && median < kMedianBoundUs) break;
  }
  EXPECT_LE(window_waits, kWindowWaitsAllowed)
      << "in every attempt many WRITEs waited about a window of the progress thread, or half "
         "of them longer than "
      << kMedianBoundUs << " us; the last attempt's completion times (us): " << all;
  EXPECT_LT(median, kMedianBoundUs) << "completion times (us): " << all;
}

}  // namespace
}  // namespace softrdma::test
