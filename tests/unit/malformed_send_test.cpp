// A SEND record whose header claims more payload than the record carries is
// malformed: the responder drops it, as it drops such a WRITE, READ response
// or datagram (one_sided.cpp, datagram.cpp), instead of completing a receive
// whose buffer was never written.
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "two_copy_responder_fixture.h"

namespace softrdma {
namespace {

class MalformedSendTest : public testing::TwoCopyResponderTest {
 protected:
  static constexpr size_t kBufferWord = 256;  // the receive buffer: memory_[256..]
  static constexpr uint8_t kUntouched = 0xAB;

  void PostReceive(uint32_t length) {
    std::memset(&memory_[kBufferWord], kUntouched, length);
    ibv_sge sge{Addr(kBufferWord), length, mr_->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(verbs::PostRecv(b_, &wr, &bad), 0);
  }
  // A's SEND with `psn` whose header says `claimed` bytes (inline, or one
  // fragment of a message of that length) while the record holds `carried`.
  void WriteShortSend(uint32_t psn, wire::PayloadMode mode, uint32_t claimed, uint32_t carried) {
    wire::RecordHeader h = RequestHeader(wire::RecordType::kSend, psn, claimed);
    h.mode = mode;
    h.flags = wire::kFlagLastFragment;
    h.payload_len = claimed;
    std::vector<uint8_t> data(carried, 0x11);
    ASSERT_TRUE(engine_->Send(*link_, h, data.data(), carried));
  }
  void ExpectDropped(uint32_t claimed) {
    ibv_wc wc{};
    EXPECT_EQ(verbs::PollCq(cq_, 1, &wc), 0)
        << "a receive completed with status " << wc.status << ", byte_len " << wc.byte_len;
    EXPECT_EQ(ExpectedPsn(), 0u) << "the malformed SEND was taken as executed";
    const auto* buffer = reinterpret_cast<const uint8_t*>(&memory_[kBufferWord]);
    for (uint32_t i = 0; i < claimed; ++i)
      ASSERT_EQ(buffer[i], kUntouched) << "byte " << i << " of the receive buffer written";
    const testing::Answer answer = TakeAnswer();
    EXPECT_FALSE(answer.any) << "a malformed request is not answered (answered: type "
                             << int(answer.h.type) << ", syndrome " << int(answer.h.syndrome)
                             << ")";
  }
};

// 64 bytes claimed, 8 carried: the one-SGE receive path of a whole message.
TEST_F(MalformedSendTest, InlinePayloadLongerThanTheRecordIsDropped) {
  PostReceive(64);
  WriteShortSend(0, wire::PayloadMode::kInline, 64, 8);
  HandNextToResponder();
  ExpectDropped(64);
}

// A last fragment that claims more than its record holds (the general
// receive path).
TEST_F(MalformedSendTest, FragmentLongerThanTheRecordIsDropped) {
  PostReceive(64);
  WriteShortSend(0, wire::PayloadMode::kFragment, 64, 8);
  HandNextToResponder();
  ExpectDropped(64);
}

}  // namespace
}  // namespace softrdma
