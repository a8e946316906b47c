// The deadline the RoCE timer check reports after a tail-loss probe: the
// second probe's due time (a quarter of `timeout` after the last progress),
// not the retransmit timer's. A caller that sleeps until the deadline it was
// given (the progress thread between its ticks) otherwise sent the second
// probe late, or not before the timer (docs/design.md "Tail-loss probe").
#include <cstdint>
#include <mutex>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "transport/roce/roce_qp.h"
#include "transport/transport.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
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

}  // namespace
}  // namespace softrdma
