// The shm wire's responder answers in request order, as a NIC's responses
// leave in PSN order: a NAK (or the ACK owed before it) for a SEND does not
// overtake the READ/atomic answers still queued for the same requester
// (queued because the requester's ring lacked room for them). Before, the
// NAK went straight into the ring: the requester then took an RNR NAK for a
// stale one (the SEND waited for its timeout) or resent READs whose answers
// were on their way.
#include <cstdint>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "two_copy_responder_fixture.h"

namespace softrdma {
namespace {

using testing::Answer;

// Filler records, addressed to no QP, that the test skips when it reads.
constexpr uint32_t kFillerQpn = 0xfffffe;

class ResponseOrderTest : public testing::TwoCopyResponderTest {
 protected:
  // Fills the ring to its last slot, with records the test later skips.
  void FillRing() {
    wire::RecordHeader h{};
    h.type = wire::RecordType::kDatagram;
    h.dst_qpn = kFillerQpn;
    std::vector<uint8_t> bytes(Ring().MaxPayload(), 0);
    uint32_t len = Ring().MaxPayload() - sizeof h;
    for (;;) {
      if (engine_->Send(*link_, h, bytes.data(), len)) continue;
      if (len == 0) break;
      len /= 2;
    }
  }
  // B's answers now in the ring, in order, fillers skipped.
  std::vector<Answer> TakeAnswers() {
    std::vector<Answer> answers;
    for (Answer a = TakeAnswer(); a.any; a = TakeAnswer())
      if (a.h.dst_qpn != kFillerQpn) answers.push_back(a);
    return answers;
  }
  // What B sends once its requester's ring has room again (the progress
  // thread's service does the same), then everything B answered.
  std::vector<Answer> AnswersAfterRoom() {
    std::vector<Answer> answers = TakeAnswers();
    {
      std::lock_guard<SpinLock> lock(responder_->lock);
      transport::FlushResponses(*engine_, *responder_);
      if (responder_->ack_pending) transport::SendAck(*engine_, *responder_);
    }
    for (Answer& a : TakeAnswers()) answers.push_back(a);
    return answers;
  }
  void PostReceive() {
    ibv_sge sge{Addr(256), 64, mr_->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(verbs::PostRecv(b_, &wr, &bad), 0);
  }
  static void ExpectAck(const Answer& a, uint32_t psn, wire::Syndrome syndrome) {
    EXPECT_EQ(a.h.type, wire::RecordType::kAck);
    EXPECT_EQ(a.h.psn, psn);
    EXPECT_EQ(static_cast<int>(a.h.syndrome), static_cast<int>(syndrome));
  }
};

// A READ of 4 KiB whose answer does not fit the requester's ring, then a
// SEND that finds no receive WQE: the READ answer leaves first, then the
// RNR NAK.
TEST_F(ResponseOrderTest, RnrNakLeavesAfterTheQueuedReadAnswer) {
  WriteRequest(wire::RecordType::kRead, 0, Addr(0), 4096);
  WriteRequest(wire::RecordType::kSend, 1, 0, 8);
  FillRing();
  HandNextToResponder();  // the READ: no room for its answer, which waits
  HandNextToResponder();  // the SEND: its request's slots now hold a NAK
  std::vector<Answer> answers = AnswersAfterRoom();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].h.type, wire::RecordType::kReadResponse) << "the NAK overtook the READ";
  EXPECT_EQ(answers[0].h.psn, 0u);
  EXPECT_EQ(answers[0].payload.size(), 4096u);
  ExpectAck(answers[1], 1, wire::Syndrome::kRnrNak);
}

// The same with a SEND executed between them: READ answer, the ACK of that
// SEND, then the NAK of the next (an ACK owed is not carried past the
// answers queued before it either).
TEST_F(ResponseOrderTest, AckOwedAndNakLeaveAfterTheQueuedAtomicAnswer) {
  memory_[0] = 41;
  PostReceive();
  WriteRequest(wire::RecordType::kAtomic, 0, Addr(0), 8, 1);
  WriteRequest(wire::RecordType::kSend, 1, 0, 8);
  WriteRequest(wire::RecordType::kSend, 2, 0, 8);
  FillRing();
  for (int i = 0; i < 3; ++i) HandNextToResponder();
  std::vector<Answer> answers = AnswersAfterRoom();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].h.type, wire::RecordType::kAtomicResponse) << "overtaken";
  EXPECT_EQ(answers[0].h.psn, 0u);
  EXPECT_EQ(Value(answers[0]), 41u);
  ExpectAck(answers[1], 1, wire::Syndrome::kAck);
  ExpectAck(answers[2], 2, wire::Syndrome::kRnrNak);
  EXPECT_EQ(memory_[0], 42u);
}

}  // namespace
}  // namespace softrdma
