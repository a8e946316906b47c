// Our RoCE responder against a requester that is not ours, scripted over the
// fake port: a "strict spec requester" (a NIC as the issue pictures it) that
// goes back at every sequence NAK it receives and spends one retry on each
// (7 in all), ignores ACKs of what it has acknowledged already, and goes
// back on its retransmit timer when a pass brings no NAK and does not
// finish. rc-transport.md §4.4's responder sends one NAK per gap, so such a
// requester spends one retry per pass that loses the same packet (the NAK,
// then one timer expiry per lost retransmission). Ours must not make it spend
// them faster. Before, the responder NAKed again at each AckReq packet past
// the gap: 18 NAKs for the first pass here, the whole budget gone at the
// first loss. Its repeats are now ACKs of epsn - 1 (kNakRepeatSyndrome) that
// such a requester ignores (docs/design.md "Repeated sequence NAKs").
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::kAckOpcode;
using testing::PsnOf;
using testing::QpOptions;
using testing::RoceTransport;

constexpr uint32_t kFirstPsn = 0xFFFFF0;  // the fixture's PSNs (they wrap)
constexpr uint32_t kMessages = 24;        // one-packet WRITEs, each with AckReq
constexpr uint32_t kLost = 5;             // the message whose packet is lost
constexpr uint32_t kBytes = 64;
constexpr int kRetryCnt = 7;

// What the responder sent back, in order.
struct Responses {
  struct Response {
    bool sequence_nak = false;
    uint32_t message = 0;  // the message the PSN names
  };
  std::mutex mutex;
  std::vector<Response> list;
  std::vector<Response> Take() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Response> out;
    out.swap(list);
    return out;
  }
};

struct StrictOutcome {
  bool finished = false;
  bool retries_exhausted = false;
  int passes = 0;
  int sequence_naks = 0;
  int naks_in_first_pass = 0;
  int timer_expiries = 0;
  int retries_spent = 0;
};

class RoceStrictRequester : public RoceTransport {
 protected:
  void SetUp() override {
    RoceTransport::SetUp();
    QpOptions o;
    o.timeout = 18;  // our side's timer never plays here
    MakePair(o);
    LoopbackInjectionHeaders(&addr_, &net_);
    target_.assign(kMessages * kBytes, 0);
    target_mr_ = Register(target_);
    // Every answer of the responder (b, the peer of a) is recorded and kept
    // from a: the scripted requester stands in for it.
    responses_ = std::make_shared<Responses>();
    port_->SetDropIf([r = responses_](const std::vector<uint8_t>& packet, uint64_t) {
      if (packet.size() >= 16 && packet[0] == kAckOpcode) {
        std::lock_guard<std::mutex> lock(r->mutex);
        r->list.push_back({(packet[12] & 0xE0) == 0x60, (PsnOf(packet) - kFirstPsn) & 0xFFFFFF});
      }
      return true;
    });
  }

  // RDMA WRITE ONLY of message i, AckReq set, as a's QP would send it.
  std::vector<uint8_t> WritePacket(uint32_t i) {
    roce::TransportHeaders h{};
    h.bth.opcode = 0x0A;
    h.bth.dest_qp = b_->qp_num;
    h.bth.psn = (kFirstPsn + i) & 0xFFFFFF;
    h.bth.ack_req = true;
    h.reth = {reinterpret_cast<uintptr_t>(target_.data()) + i * kBytes, target_mr_->rkey, kBytes};
    std::vector<uint8_t> payload(kBytes, uint8_t(i + 1)), out(256);
    size_t n = 0;
    EXPECT_TRUE(roce::EncodePacket(net_, h, payload, out, &n).ok());
    out.resize(n);
    return out;
  }

  // Lets the engine take every injected datagram and answer its burst.
  void Drive(uint64_t injected) {
    for (int i = 0; i < 5000 && port_->delivered() < injected; ++i) Wait(cq_b_, 1, 1);
    for (int i = 0; i < 3; ++i) Wait(cq_b_, 1, 1);  // the burst's coalesced ACK
  }

  // The strict requester: passes from the oldest unacknowledged message to
  // the last; message kLost's packet is lost in its first `losses`
  // transmissions. Each sequence NAK acknowledges what is before it, then
  // costs a retry and a go-back; a pass without one that leaves messages
  // unacknowledged costs a timer expiry (a retry). Progress restores the
  // budget, as IBA's retry counter counts tries at one PSN.
  StrictOutcome Run(int losses) {
    StrictOutcome out;
    uint32_t acked = 0;  // messages acknowledged
    int retries = kRetryCnt, sent_lost = 0;
    uint64_t injected = port_->delivered();
    while (acked < kMessages && out.passes < 20) {
      ++out.passes;
      for (uint32_t i = acked; i < kMessages; ++i) {
        if (i == kLost && sent_lost++ < losses) continue;
        port_->Inject(WritePacket(i), addr_, addr_);
        ++injected;
      }
      Drive(injected);
      bool went_back = false;
      for (const Responses::Response& r : responses_->Take()) {
        const uint32_t before = r.sequence_nak ? r.message : r.message + 1;
        if (before > acked && before <= kMessages) {
          acked = before;
          retries = kRetryCnt;
        }
        if (!r.sequence_nak) continue;
        ++out.sequence_naks;
        if (out.passes == 1) ++out.naks_in_first_pass;
        went_back = true;
        if (retries == 0) {
          out.retries_exhausted = true;
          return out;
        }
        --retries;
        ++out.retries_spent;
      }
      if (!went_back && acked < kMessages) {
        ++out.timer_expiries;
        if (retries == 0) {
          out.retries_exhausted = true;
          return out;
        }
        --retries;
        ++out.retries_spent;
      }
    }
    out.finished = acked == kMessages;
    return out;
  }

  void ExpectTargetWritten() {
    for (uint32_t i = 0; i < kMessages; ++i) EXPECT_EQ(target_[i * kBytes], uint8_t(i + 1)) << i;
  }

  in6_addr addr_{};
  roce::NetworkHeaders net_;
  std::vector<uint8_t> target_;
  ibv_mr* target_mr_ = nullptr;
  std::shared_ptr<Responses> responses_;
};

// One loss: one NAK for the pass that had 18 AckReq packets past the gap
// (and 17 repeats it ignores).
TEST_F(RoceStrictRequester, OneNakForAPassWithManyAckReqPacketsPastTheGap) {
  const StrictOutcome o = Run(1);
  EXPECT_TRUE(o.finished);
  EXPECT_FALSE(o.retries_exhausted);
  EXPECT_EQ(o.naks_in_first_pass, 1);
  EXPECT_EQ(o.sequence_naks, 1);
  EXPECT_EQ(o.retries_spent, 1);
  EXPECT_EQ(o.passes, 2);
  ExpectTargetWritten();
}

// The same packet lost in 7 passes in a row: as the spec's one-NAK rule
// makes it, the strict requester spends 7 retries (the NAK, then six timer
// expiries) and finishes at the 8th pass with none left.
TEST_F(RoceStrictRequester, RepeatedLossOfOnePacketSpendsOneRetryPerPass) {
  const StrictOutcome o = Run(kRetryCnt);
  EXPECT_TRUE(o.finished);
  EXPECT_FALSE(o.retries_exhausted);
  EXPECT_EQ(o.naks_in_first_pass, 1);
  EXPECT_EQ(o.sequence_naks, 1);
  EXPECT_EQ(o.timer_expiries, kRetryCnt - 1);
  EXPECT_EQ(o.retries_spent, kRetryCnt);
  EXPECT_EQ(o.passes, kRetryCnt + 1);
  ExpectTargetWritten();
}

// One loss more than the budget: the strict requester runs out at the same
// pass as under the spec's rule, not before.
TEST_F(RoceStrictRequester, OneLossMoreThanTheBudgetExhaustsItAtTheSamePass) {
  const StrictOutcome o = Run(kRetryCnt + 1);
  EXPECT_FALSE(o.finished);
  EXPECT_TRUE(o.retries_exhausted);
  EXPECT_EQ(o.retries_spent, kRetryCnt);
  EXPECT_EQ(o.passes, kRetryCnt + 1);
}

}  // namespace
}  // namespace softrdma
