// The inbound ring as the busy-poll path and producers see it: the inline
// head checks against Head(), and producers working from the consumer
// position they last read instead of reading the consumer's line each time.
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

TEST(ShmRingPollTest, InlineHeadChecksAgreeWithHead) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->HeadEmpty());
  EXPECT_FALSE(r->HeadReady());
  EXPECT_EQ(r->Head(), Ring::HeadState::kEmpty);

  // Reserved but not committed: invisible at first (the claim is only in the
  // reserve word), pending once PublishStalledClaim put it in its seq word.
  Reservation res;
  ASSERT_TRUE(r->TryReserve(10, &res));
  EXPECT_TRUE(r->HeadEmpty());
  EXPECT_FALSE(r->HeadReady());
  EXPECT_EQ(r->Head(), Ring::HeadState::kEmpty);
  EXPECT_TRUE(r->PublishStalledClaim());
  EXPECT_FALSE(r->PublishStalledClaim());  // already there
  EXPECT_FALSE(r->HeadEmpty());
  EXPECT_FALSE(r->HeadReady());
  EXPECT_EQ(r->Head(), Ring::HeadState::kPending);
  r->Commit(res);
  EXPECT_FALSE(r->PublishStalledClaim());  // committed: nothing to publish
  EXPECT_FALSE(r->HeadEmpty());
  EXPECT_TRUE(r->HeadReady());
  EXPECT_EQ(r->Head(), Ring::HeadState::kReady);

  // Consumed, over several laps and with records that wrap.
  for (int i = 0; i < 100; ++i) {
    RecordView v;
    ASSERT_TRUE(r->Peek(&v));
    r->Release(v);
    EXPECT_TRUE(r->HeadEmpty()) << "after record " << i;
    EXPECT_FALSE(r->HeadReady()) << "after record " << i;
    EXPECT_EQ(r->Head(), Ring::HeadState::kEmpty);
    ASSERT_TRUE(Produce(r, static_cast<uint32_t>(i * 37 % 300)));
    EXPECT_FALSE(r->HeadEmpty()) << "after record " << i;
    EXPECT_TRUE(r->HeadReady()) << "after record " << i;
  }
}

// Head(&pos) names the consumer position it describes: the progress thread
// tells "the record it saw is still waiting" from "the application drained
// it and another arrived" by it (Engine::WatchPollingApplication).
TEST(ShmRingPollTest, HeadTellsThePositionItDescribes) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  uint64_t pos = 99;
  EXPECT_EQ(r->Head(&pos), Ring::HeadState::kEmpty);
  EXPECT_EQ(pos, 0u);
  ASSERT_TRUE(Produce(r, 100));  // two slots
  EXPECT_EQ(r->Head(&pos), Ring::HeadState::kReady);
  EXPECT_EQ(pos, 0u);
  ASSERT_TRUE(Produce(r, 8));  // a small record, behind it
  RecordView v;
  ASSERT_TRUE(r->Peek(&v));
  r->Release(v);
  // Another record is ready, at another position.
  EXPECT_EQ(r->Head(&pos), Ring::HeadState::kReady);
  EXPECT_EQ(pos, 2u);
  ASSERT_TRUE(r->Peek(&v));
  r->Release(v);
  EXPECT_EQ(r->Head(&pos), Ring::HeadState::kEmpty);
  EXPECT_EQ(pos, 2u + Ring::SlotsFor(8));
}

TEST(ShmRingPollTest, ProducersCatchUpWithTheConsumerWhenTheRingLooksFull) {
  // 16 slots, small records: the producer's view of the consumer is
  // refreshed only when the ring looks full by it. Each lap must then find
  // the room the consumer made, and a really full ring must still be full.
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  const uint32_t per_record = Ring::SlotsFor(8);
  const int fit = static_cast<int>(16 / per_record);
  for (int lap = 0; lap < 5; ++lap) {
    for (int i = 0; i < fit; ++i) ASSERT_TRUE(Produce(r, 8)) << "lap " << lap << " record " << i;
    EXPECT_FALSE(Produce(r, 8)) << "lap " << lap << ": a full ring took a record";
    EXPECT_EQ(r->UsedSlots(), 16u);
    // The consumer frees part of the ring: exactly that much room appears.
    const int freed = 1 + lap % 3;
    for (int i = 0; i < freed; ++i) {
      RecordView v;
      ASSERT_TRUE(r->Peek(&v));
      r->Release(v);
    }
    for (int i = 0; i < freed; ++i) ASSERT_TRUE(Produce(r, 8)) << "lap " << lap;
    EXPECT_FALSE(Produce(r, 8));
    // Drain everything for the next lap.
    RecordView v;
    while (r->Peek(&v)) r->Release(v);
    EXPECT_EQ(r->UsedSlots(), 0u);
  }
  EXPECT_EQ(r->ReservedSlots(), per_record * (5u * fit + (1 + 2 + 3 + 1 + 2)));
}

TEST(ShmRingPollTest, ConsumeBatchPublishesRoomOnce) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  const uint32_t per_record = Ring::SlotsFor(8);
  const uint32_t fit = 16 / per_record;
  for (uint32_t i = 0; i < fit; ++i) ASSERT_TRUE(Produce(r, 8));
  const uint32_t taken = fit - 2;
  int seen = 0;
  EXPECT_EQ(r->ConsumeBatch(taken,
                            [&](const RecordView& v) {
                              EXPECT_EQ(v.size(), 8u);
                              ++seen;
                            }),
            taken);
  EXPECT_EQ(seen, static_cast<int>(taken));
  EXPECT_EQ(r->UsedSlots(), 2u * per_record);
  for (uint32_t i = 0; i < taken; ++i) ASSERT_TRUE(Produce(r, 8));
  EXPECT_FALSE(Produce(r, 8));
}

// ConsumeBatch turns committed records into views itself (Ring::
// ViewCommitted) and hands the rest to PeekAt: records of one and of
// several slots, records that wrap the end of the data array, cancelled
// ones in between, lap after lap, all come out intact, in order, once.
TEST(ShmRingPollTest, ConsumeBatchDeliversWrappedRecordsAndSkipsCancelled) {
  LocalRing lr(16);
  Ring* r = lr.ring;
  ASSERT_NE(r, nullptr);
  uint64_t produced = 0, consumed = 0, wrapped = 0;
  for (int round = 0; round < 60; ++round) {
    // 8, 100 and 190 bytes: 1, 2 and 4 slots.
    const uint32_t sizes[] = {8, 100, 190};
    Reservation cancelled;
    // 1 to 3 slots, so that the records' phase in the ring moves.
    ASSERT_TRUE(r->TryReserve(static_cast<uint32_t>(round % 3) * 64 + 10, &cancelled));
    for (uint32_t len : sizes) {
      const auto bytes = Pattern(1, produced, len);
      ASSERT_TRUE(r->TryProduce(nullptr, 0, bytes.data(), len)) << "round " << round;
      ++produced;
    }
    r->Cancel(cancelled);
    const size_t n = r->ConsumeBatch(64, [&](const RecordView& v) {
      const uint32_t len = sizes[consumed % 3];
      ASSERT_EQ(v.size(), len);
      wrapped += !v.second().empty();
      EXPECT_EQ(ReadAll(v), Pattern(1, consumed, len)) << "record " << consumed;
      ++consumed;
    });
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(consumed, produced);
    EXPECT_EQ(r->UsedSlots(), 0u);
    EXPECT_TRUE(r->HeadEmpty());
  }
  EXPECT_GT(wrapped, 0u);
}

}  // namespace
}  // namespace softrdma::shm
