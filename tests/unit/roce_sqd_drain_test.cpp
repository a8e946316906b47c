// The SQD drain over the RoCE wire (transport/sq_drain.h): the SEND started
// before the modify to SQD is finished, resent if need be (after an RNR NAK,
// or a loss: tail probe or timeout), IBV_EVENT_SQ_DRAINED comes once after
// its completion and sq_draining reads 1 until then; a SEND posted in SQD
// waits for RTS. The shm wire's cases: tests/verbs/sqd_drain_test.cpp.
#include <fcntl.h>
#include <poll.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::RoceTransport;

constexpr uint8_t kRcSendOnly = 0x04;  // BTH opcode
constexpr uint8_t kAethRnrNak = 0x20;  // AETH syndrome bits 7-5: 001

uint32_t Be24(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} << 16 | uint32_t{b[at + 1]} << 8 | b[at + 2];
}

class RoceSqdDrain : public RoceTransport {
 protected:
  void SetUp() override {
    RoceTransport::SetUp();
    if (HasFatalFailure()) return;
    const int flags = fcntl(ctx_->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
    MakePair();
    src_.assign(64, 0x5a);
    dst_.assign(64, 0);
    smr_ = Register(src_);
    dmr_ = Register(dst_);
  }
  int EnterState(ibv_qp* qp, ibv_qp_state s, bool notify = false) {
    ibv_qp_attr a{};
    a.qp_state = s;
    a.en_sqd_async_notify = notify;
    return ModifyQp(qp, &a, IBV_QP_STATE | (notify ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0));
  }
  int Draining(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    if (QueryQp(qp, &a, IBV_QP_STATE, &init)) return -1;
    return a.sq_draining;
  }
  // The next async event (acknowledged), false if none within `ms`.
  bool NextEvent(ibv_async_event* ev, int ms) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1 || GetAsyncEvent(ctx_, ev)) return false;
    AckAsyncEvent(ev);
    return true;
  }
  int Send(uint64_t id) { return Post(a_, IBV_WR_SEND, smr_, src_.data(), 64, id); }
  // The drain's end: SEND 1 completes, then the event, once.
  void ExpectDrainedAfterTheSend() {
    auto wc = Wait(cq_a_, 1, 5000);
    ASSERT_EQ(wc.size(), 1u) << "the SEND started before SQD never completed";
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    ibv_async_event ev{};
    ASSERT_TRUE(NextEvent(&ev, 2000)) << "no IBV_EVENT_SQ_DRAINED";
    EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
    EXPECT_EQ(ev.element.qp, a_);
    EXPECT_FALSE(NextEvent(&ev, 100)) << "a second event " << ev.event_type;
    EXPECT_EQ(Draining(a_), 0);
  }

  std::vector<uint8_t> src_, dst_;
  ibv_mr* smr_ = nullptr;
  ibv_mr* dmr_ = nullptr;
  // Counted by the port's filter (the engine's thread), until TearDown.
  std::atomic<uint32_t> rnr_naks_{0};
  std::atomic<uint32_t> dropped_{0};
};

TEST_F(RoceSqdDrain, SendResentAfterRnrInSqdThenEventAndRtsResumes) {
  // B has no receive WQE: RNR NAKs, the SEND resent after each (forever).
  const uint32_t to = a_->qp_num;
  port_->SetDropIf([this, to](const std::vector<uint8_t>& b, uint64_t) {
    if (b.size() >= 13 && b[0] == testing::kAckOpcode && Be24(b, 5) == to &&
        (b[12] & 0xe0) == kAethRnrNak)
      rnr_naks_.fetch_add(1);
    return false;
  });
  ASSERT_EQ(Send(1), 0);
  const uint64_t end = NowNs() + 2'000'000'000;
  while (rnr_naks_.load() == 0 && NowNs() < end) std::this_thread::yield();
  ASSERT_GT(rnr_naks_.load(), 0u) << "no RNR NAK";
  ASSERT_EQ(EnterState(a_, IBV_QPS_SQD, /*notify=*/true), 0);
  EXPECT_EQ(Draining(a_), 1);
  ASSERT_EQ(Send(2), 0);  // accepted in SQD, not started
  PostRecv(b_, dmr_, dst_.data(), 64, 10);
  ExpectDrainedAfterTheSend();
  EXPECT_EQ(Wait(cq_b_, 1).size(), 1u);
  PostRecv(b_, dmr_, dst_.data(), 64, 11);
  EXPECT_TRUE(Wait(cq_b_, 1, 100).empty()) << "a SEND posted in SQD was sent";
  ASSERT_EQ(EnterState(a_, IBV_QPS_RTS), 0);
  auto wc = Wait(cq_a_, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(Wait(cq_b_, 1).size(), 1u);
}

TEST_F(RoceSqdDrain, LostSendResentInSqdThenEvent) {
  const uint32_t to = b_->qp_num;
  port_->SetDropIf([this, to](const std::vector<uint8_t>& b, uint64_t) {
    if (b.size() < 8 || b[0] != kRcSendOnly) return false;
    if (Be24(b, 5) != to) return false;
    return dropped_.fetch_add(1) == 0;  // the first transmission only
  });
  PostRecv(b_, dmr_, dst_.data(), 64, 10);
  ASSERT_EQ(Send(1), 0);
  ASSERT_EQ(EnterState(a_, IBV_QPS_SQD, /*notify=*/true), 0);
  EXPECT_EQ(Draining(a_), 1);
  ExpectDrainedAfterTheSend();
  EXPECT_GE(dropped_.load(), 2u) << "the SEND was not resent";
}

}  // namespace
}  // namespace softrdma
