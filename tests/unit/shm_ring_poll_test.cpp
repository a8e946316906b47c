// The inbound ring as the busy-poll path sees it: the inline emptiness check
// agrees with Head() in every state, over several laps.
#include <cstdint>
#include <cstring>

#include "shm_ring_test_util.h"

namespace softrdma::shm {
namespace {

using namespace softrdma::shm::ringtest;

bool Produce(Ring* r, uint32_t bytes) {
  std::vector<uint8_t> payload(bytes, 0x5a);
  return r->TryProduce(nullptr, 0, payload.data(), bytes);
}

TEST(ShmRingPollTest, HeadEmptyAgreesWithHead) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->HeadEmpty());
  EXPECT_EQ(r->Head(), Ring::HeadState::kEmpty);

  // Reserved but not committed: not empty (a record is on its way).
  Reservation res;
  ASSERT_TRUE(r->TryReserve(10, &res));
  EXPECT_FALSE(r->HeadEmpty());
  EXPECT_EQ(r->Head(), Ring::HeadState::kPending);
  r->Commit(res);
  EXPECT_FALSE(r->HeadEmpty());
  EXPECT_EQ(r->Head(), Ring::HeadState::kReady);

  // Consumed, over several laps and with records that wrap.
  for (int i = 0; i < 100; ++i) {
    RecordView v;
    ASSERT_TRUE(r->Peek(&v));
    r->Release(v);
    EXPECT_TRUE(r->HeadEmpty()) << "after record " << i;
    EXPECT_EQ(r->Head(), Ring::HeadState::kEmpty);
    ASSERT_TRUE(Produce(r, static_cast<uint32_t>(i * 37 % 300)));
    EXPECT_FALSE(r->HeadEmpty()) << "after record " << i;
  }
}

TEST(ShmRingPollTest, ConsumeBatchPublishesRoomOnce) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(Produce(r, 8));
  int seen = 0;
  EXPECT_EQ(r->ConsumeBatch(10,
                            [&](const RecordView& v) {
                              EXPECT_EQ(v.size(), 8u);
                              ++seen;
                            }),
            10u);
  EXPECT_EQ(seen, 10);
  EXPECT_EQ(r->UsedSlots(), 6u);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Produce(r, 8));
  EXPECT_FALSE(Produce(r, 8));
}

}  // namespace
}  // namespace softrdma::shm
