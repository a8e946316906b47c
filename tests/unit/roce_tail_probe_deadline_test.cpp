// The deadline the RoCE timer check reports after a tail-loss probe: the
// second probe's due time (a quarter of `timeout` after the last progress),
// not the retransmit timer's. A caller that sleeps until the deadline it was
// given (the progress thread between its ticks) otherwise sent the second
// probe late, or not before the timer (docs/design.md "Tail-loss probe").
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "transport/roce/roce_qp.h"
#include "transport/transport.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::kAckOpcode;
using testing::PsnOf;
using testing::QpOptions;
using testing::RoceTransport;
namespace tr = transport::roce;

class RoceTailProbeDeadline : public RoceTransport {};

TEST_F(RoceTailProbeDeadline, FirstProbeReportsTheSecondProbesDueTime) {
  QpOptions o;
  o.timeout = 20;  // 4.3 s: the first probe is due 537 ms after the send
  MakePair(o);
  port_->SetDropIf([](const std::vector<uint8_t>&, uint64_t) { return true; });
  std::vector<uint8_t> src(64, 9), dst(64, 0);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  const uint64_t sent_before = port_->sent();
  ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, smr, src.data(), 64, 1,
                 reinterpret_cast<uintptr_t>(dst.data()), dmr->rkey),
            0);
  for (int i = 0; i < 2000 && port_->sent() == sent_before; ++i) usleep(1000);
  ASSERT_GT(port_->sent(), sent_before) << "the WRITE never left";
  const uint64_t timeout = transport::AckTimeoutNs(o.timeout);
  const uint64_t eighth = timeout / 8;
  Qp* qp = Qp::From(a_);
  std::lock_guard<SpinLock> lock(qp->lock);
  ASSERT_EQ(qp->roce->probes_sent, 0u) << "the first probe went before this check (late run)";
  const uint64_t last_progress = qp->last_ack_ns;
  uint64_t deadline = 0;
  // The check at the first probe's due time sends it.
  EXPECT_TRUE(tr::CheckTimers(*engine_, *qp, last_progress + eighth, &deadline));
  EXPECT_EQ(qp->roce->probes_sent, 1u);
  EXPECT_EQ(deadline, last_progress + 2 * eighth) << "not the second probe's due time";
  // The second sends it; then only the retransmit timer is left.
  deadline = 0;
  EXPECT_TRUE(tr::CheckTimers(*engine_, *qp, last_progress + 2 * eighth, &deadline));
  EXPECT_EQ(qp->roce->probes_sent, 2u);
  EXPECT_EQ(deadline, last_progress + timeout);
}

// While the application polls its CQ the progress thread watches it and
// looks in once per window (up to 16 ms); a send posted while no timer was
// armed must still have its tail-loss probe leave at its due time, not at the
// next window's timer check. Every first transmission is lost here, so only
// the probe (or, very late, the retransmit timer) delivers the WRITE; the
// time its second appearance leaves, less the due time, is the lateness.
// The median of several sends, each after a different stretch of polling
// (so the watch's windows fall at different points), tolerates a load that
// delays a few of them. Before the engine took posted due times
// (Engine::TimerDueBy): median 5-9 ms late.
TEST_F(RoceTailProbeDeadline, ProbeLeavesAtItsDueTimeWhileTheApplicationPolls) {
  QpOptions o;
  o.timeout = 12;  // 16.8 ms: the first probe is due 2.1 ms after the send
  MakePair(o);
  struct Seen {
    std::map<uint32_t, int> appearances;  // under the port's lock
    std::atomic<uint64_t> second_ns{0};   // the lost packet's second departure
  };
  auto seen = std::make_shared<Seen>();
  port_->SetDropIf([seen](const std::vector<uint8_t>& packet, uint64_t) {
    if (packet.size() < 12 || packet[0] == kAckOpcode) return false;
    const int n = ++seen->appearances[PsnOf(packet)];
    if (n == 2 && seen->second_ns.load() == 0) seen->second_ns.store(NowNs());
    return n == 1;
  });
  std::vector<uint8_t> src(64, 9), dst(64, 0);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  const uint64_t eighth = transport::AckTimeoutNs(o.timeout) / 8;
  constexpr int kSends = 9;
  std::vector<int64_t> late_us;
  for (int i = 0; i < kSends; ++i) {
    // Poll with nothing to find for 0-15 ms: the watch goes on meanwhile.
    Wait(cq_a_, 1, (i * 7) % 16);
    seen->second_ns.store(0);
    const uint64_t posted = NowNs();  // the probe is due an eighth after this
    ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, smr, src.data(), 64, 100 + i,
                   reinterpret_cast<uintptr_t>(dst.data()), dmr->rkey),
              0);
    auto wc = Wait(cq_a_, 1, 2000);
    ASSERT_EQ(wc.size(), 1u) << "send " << i << " never completed";
    ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
    ASSERT_NE(seen->second_ns.load(), 0u);
    late_us.push_back(
        (static_cast<int64_t>(seen->second_ns.load() - posted) - static_cast<int64_t>(eighth)) /
        1000);
  }
  std::sort(late_us.begin(), late_us.end());
  std::string all;
  for (int64_t l : late_us) all += std::to_string(l) + " ";
  EXPECT_LT(late_us[kSends / 2], 1000)
      << "median lateness (us) over " << kSends << " sends, sorted: " << all;
}

}  // namespace
}  // namespace softrdma
