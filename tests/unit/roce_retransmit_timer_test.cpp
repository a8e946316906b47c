// The RoCE retransmit timer's bound: a peer that falls silent in the middle
// of a transfer (killed, its link down) ends the oldest outstanding WQE in
// RETRY_EXC_ERR timeout x (retry_cnt + 1) after the last ACK, the first try
// and retry_cnt retries each waiting one timeout, as on a NIC, and the WQEs
// behind it in WR_FLUSH_ERR. Not earlier, and not later by more than the
// scheduling of the thread that fires the timer.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "transport/transport.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::QpOptions;
using testing::RoceTransport;

using testing::kAckOpcode;

class RoceRetransmitTimer : public RoceTransport {
 protected:
  // One transfer whose peer falls silent after its first ACK: returns the
  // time from that ACK to the RETRY_EXC_ERR completion, in ns (0: none came
  // in 5 s, or the completions were not as expected). The application
  // blocks in ibv_get_cq_event meanwhile, so the progress thread alone runs
  // the timer, as behind a program that waits for its completions. Makes
  // and removes its own QPs, CQ and MRs.
  uint64_t SilenceAfterFirstAck(const QpOptions& o) {
    ibv_comp_channel* channel = CreateCompChannel(ctx_);
    ibv_cq* cq = channel ? CreateCq(ctx_, 64, nullptr, channel, 0) : nullptr;
    ibv_qp* a = cq ? MakeQp(cq, o) : nullptr;
    ibv_qp* b = MakeQp(cq_b_, o);
    std::vector<uint8_t> src(3 * 65536, 7), dst(3 * 65536, 0);
    ibv_mr* smr = RegMr(pd_, src.data(), src.size(), reinterpret_cast<uintptr_t>(src.data()),
                        IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* dmr = RegMr(pd_, dst.data(), dst.size(), reinterpret_cast<uintptr_t>(dst.data()),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    uint64_t elapsed = 0;
    if (a && b && smr && dmr && Connect(a, b->qp_num, o) == 0 && Connect(b, a->qp_num, o) == 0)
      elapsed = Run(channel, cq, a, smr, src, dmr, dst);
    else
      ADD_FAILURE() << "setup failed";
    port_->SetDropIf(nullptr);
    for (ibv_qp* qp : {a, b})
      if (qp) DestroyQp(qp);
    for (ibv_mr* mr : {smr, dmr})
      if (mr) DeregMr(mr);
    if (cq) DestroyCq(cq);
    if (channel) DestroyCompChannel(channel);
    return elapsed;
  }

 private:
  uint64_t Run(ibv_comp_channel* channel, ibv_cq* cq, ibv_qp* a, ibv_mr* smr,
               std::vector<uint8_t>& src, ibv_mr* dmr, std::vector<uint8_t>& dst) {
    // The responder's first ACK passes and is timed when it leaves; from
    // then on nothing gets through either way.
    auto ack_at = std::make_shared<std::atomic<uint64_t>>(0);
    port_->SetDropIf([ack_at](const std::vector<uint8_t>& packet, uint64_t) {
      if (ack_at->load()) return true;
      if (packet[0] == kAckOpcode) ack_at->store(NowNs());
      return false;
    });
    // Three WRITEs of 64 packets: the first ACK (one per burst the
    // responder polls, 64 packets at most) leaves at least one outstanding.
    constexpr int kWqes = 3;
    EXPECT_EQ(ReqNotifyCq(cq, 0), 0);
    for (int i = 0; i < kWqes; ++i)
      EXPECT_EQ(Post(a, IBV_WR_RDMA_WRITE, smr, src.data() + i * 65536, 65536, i + 1,
                     reinterpret_cast<uintptr_t>(dst.data() + i * 65536), dmr->rkey),
                0);
    std::vector<ibv_wc> wcs;
    uint64_t error_at = 0;
    const uint64_t end = NowNs() + 5000000000ull;
    while (wcs.size() < kWqes && NowNs() < end) {
      ibv_cq* got = nullptr;
      void* context = nullptr;
      if (GetCqEvent(channel, &got, &context) != 0) break;
      AckCqEvents(got, 1);
      EXPECT_EQ(ReqNotifyCq(cq, 0), 0);
      ibv_wc wc[kWqes];
      const int n = PollCq(cq, kWqes, wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status == IBV_WC_RETRY_EXC_ERR && !error_at) error_at = NowNs();
        wcs.push_back(wc[i]);
      }
    }
    EXPECT_EQ(wcs.size(), size_t{kWqes});
    EXPECT_NE(ack_at->load(), 0u) << "no ACK passed";
    // Success for what the ACK covered, then RETRY_EXC_ERR, then flushes.
    size_t i = 0;
    while (i < wcs.size() && wcs[i].status == IBV_WC_SUCCESS) ++i;
    EXPECT_LT(i, wcs.size()) << "every WRITE succeeded";
    if (i < wcs.size()) {
      EXPECT_EQ(wcs[i].status, IBV_WC_RETRY_EXC_ERR);
    }
    for (++i; i < wcs.size(); ++i) EXPECT_EQ(wcs[i].status, IBV_WC_WR_FLUSH_ERR);
    if (::testing::Test::HasFailure() || !error_at || !ack_at->load()) return 0;
    return error_at - ack_at->load();
  }
};

// timeout 12 (16.8 ms), retry_cnt 7: 134 ms. Before, each try counted from
// the timer check that noticed the last ACK or the previous expiry, and the
// checks came every 5 ms at most: 206-212 ms (54% late; between two
// namespace hosts at timeout 14, ~10% and 50-60 ms). Now each try is due
// one timeout after the previous one was due; what may remain is the
// lateness of the last check alone, allowed here up to 15% (20 ms: the
// progress thread's wake-up). Up to five tries, the best counts: this
// process's scheduling is not the transport's (at nice 19 next to builds at
// load 7, single wake-ups came 20-57 ms late and one try in three or four
// missed), and the old code was late every time.
TEST_F(RoceRetransmitTimer, SilentPeerEndsInRetryExceededWithinTimeoutTimesTries) {
  QpOptions o;
  o.timeout = 12;
  o.retry_cnt = 7;
  const uint64_t bound_ns = transport::AckTimeoutNs(o.timeout) * (o.retry_cnt + 1);
  // At a positive niceness next to other work this process gets a sliver
  // of a CPU: 30% there (still well under the old code's 54%).
  errno = 0;
  const bool niced = getpriority(PRIO_PROCESS, 0) > 0;
  const uint64_t slack_ns = bound_ns * (niced ? 30 : 15) / 100;
  uint64_t best = UINT64_MAX;
  for (int attempt = 0; attempt < 5 && best > bound_ns + slack_ns; ++attempt) {
    const uint64_t elapsed = SilenceAfterFirstAck(o);
    ASSERT_NE(elapsed, 0u);
    EXPECT_GE(elapsed, bound_ns) << "RETRY_EXC_ERR before timeout x (retry_cnt + 1)";
    std::printf("attempt %d: RETRY_EXC_ERR %.1f ms after the last ACK (bound %.1f ms)\n", attempt,
                elapsed / 1e6, bound_ns / 1e6);
    best = std::min(best, elapsed);
  }
  EXPECT_LE(best, bound_ns + slack_ns) << "best of the tries: " << best / 1e6 << " ms, bound "
                                       << bound_ns / 1e6 << " ms + " << slack_ns / 1e6;
}

}  // namespace
}  // namespace softrdma
