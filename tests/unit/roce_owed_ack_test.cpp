// A RoCE responder that stops (destroy, modify to ERR or RESET) first
// executes and acknowledges the requests that reached its port, as a NIC
// acknowledges a request on arrival: the requester of a message that arrived
// in time completes it, instead of retransmitting into a QP that is gone and
// ending in RETRY_EXC_ERR (ibv_srq_pingpong over SOFTRDMA_WIRE=roce: the
// client destroyed its QPs with the server's last SENDs unread in its
// socket). Requests that come after the QP stopped get no answer at all, as
// from a NIC: their requester times out.
#include <atomic>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "transport/roce/roce_qp.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::QpOptions;
using testing::RoceTransport;

using testing::kAckOpcode;
// More than one poll of the port takes (64): the application's poll sees
// completions while the rest still waits in the port.
constexpr uint32_t kSends = 100;
constexpr uint32_t kFirstPsn = 0xFFFFF0;  // the fixture's sq_psn / rq_psn

uint32_t Be24(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} << 16 | uint32_t{b[at + 1]} << 8 | b[at + 2];
}

enum class Stop { kDestroy, kError, kReset };

class RoceOwedAck : public RoceTransport, public ::testing::WithParamInterface<Stop> {
 protected:
  // Records, for every datagram sent to QP `to_qpn_`, the PSN of the last
  // ACK and how many datagrams went there after `watch_after_` was set.
  void RecordAcks() {
    port_->SetDropIf([this](const std::vector<uint8_t>& b, uint64_t) {
      if (b.size() < 12 || Be24(b, 5) != to_qpn_.load()) return false;
      if (b[0] == kAckOpcode) last_ack_psn_.store(Be24(b, 9));
      if (watch_after_.load()) sent_after_.fetch_add(1);
      return false;
    });
  }
  // The responder B stops as the test's parameter says.
  void StopResponder() {
    switch (GetParam()) {
      case Stop::kDestroy:
        ASSERT_EQ(DestroyQp(b_), 0);
        b_ = nullptr;
        break;
      case Stop::kError:
      case Stop::kReset: {
        ibv_qp_attr a{};
        a.qp_state = GetParam() == Stop::kError ? IBV_QPS_ERR : IBV_QPS_RESET;
        ASSERT_EQ(ModifyQp(b_, &a, IBV_QP_STATE), 0);
        break;
      }
    }
  }

  std::atomic<uint32_t> to_qpn_{0};
  std::atomic<uint32_t> last_ack_psn_{0};
  std::atomic<bool> watch_after_{false};
  std::atomic<uint64_t> sent_after_{0};
};

TEST_P(RoceOwedAck, RequestsThatReachedThePortAreAcknowledgedBeforeTheQpStops) {
  QpOptions o;
  o.retry_cnt = 1;  // a message that is never acknowledged fails in ~2 x 17 ms
  MakePair(o);
  to_qpn_.store(a_->qp_num);
  RecordAcks();
  std::vector<uint8_t> src(64, 0x5a), dst(size_t{kSends} * 64, 0);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  for (uint32_t i = 0; i < kSends; ++i) PostRecv(b_, dmr, dst.data() + i * 64, 64, i);
  for (uint32_t i = 0; i < kSends; ++i) ASSERT_EQ(Post(a_, IBV_WR_SEND, smr, src.data(), 64, i), 0);
  // The application sees its first messages and stops the QP at once, with
  // the others still in the port.
  ASSERT_FALSE(Wait(cq_b_, 1).empty());
  const uint64_t timeouts = transport::roce::GetCounters().timeouts.load();
  StopResponder();
  // Everything that reached the port before the stop was executed and
  // acknowledged: the ACK of the last PSN is on the wire already.
  EXPECT_EQ(last_ack_psn_.load(), (kFirstPsn + kSends - 1) & 0xFFFFFF);
  const std::vector<ibv_wc> done = Wait(cq_a_, kSends, 2000);
  ASSERT_EQ(done.size(), kSends);
  for (const ibv_wc& wc : done) EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << "wr_id " << wc.wr_id;
  EXPECT_EQ(transport::roce::GetCounters().timeouts.load(), timeouts)
      << "the requester waited for a retransmit timer";

  // A request that comes after the stop is not answered (no ACK, no NAK),
  // as by a NIC whose QP is gone or stopped: its requester times out.
  watch_after_.store(true);
  ASSERT_EQ(Post(a_, IBV_WR_SEND, smr, src.data(), 64, kSends), 0);
  const std::vector<ibv_wc> late = Wait(cq_a_, 1, 2000);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(sent_after_.load(), 0u) << "the stopped responder answered";
  port_->SetDropIf(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Stops, RoceOwedAck,
                         ::testing::Values(Stop::kDestroy, Stop::kError, Stop::kReset),
                         [](const ::testing::TestParamInfo<Stop>& info) {
                           switch (info.param) {
                             case Stop::kDestroy:
                               return "Destroy";
                             case Stop::kError:
                               return "ModifyToError";
                             case Stop::kReset:
                               return "ModifyToReset";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace softrdma
