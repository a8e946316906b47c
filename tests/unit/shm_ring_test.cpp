// Unit tests of the shm wire's inbound ring, single-threaded behaviour:
// geometry, validation, data integrity across sizes and wraps, back-pressure.
#include <cstdint>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "shm_ring_test_util.h"

namespace softrdma::shm {
namespace {

using namespace softrdma::shm::ringtest;
using namespace std::chrono_literals;

TEST(ShmRingTest, GeometryAndFormatValidation) {
  EXPECT_EQ(Ring::RegionBytes(0), 0u);
  EXPECT_EQ(Ring::RegionBytes(1), 0u);
  EXPECT_EQ(Ring::RegionBytes(3), 0u);
  EXPECT_EQ(Ring::RegionBytes(Ring::kMaxSlots * 2), 0u);
  EXPECT_EQ(Ring::RegionBytes(16) - Ring::RegionBytes(8), 8u * (8 + kSlotBytes));
  // Two slots at least (the line after a record's first is its own).
  EXPECT_EQ(Ring::SlotsFor(0), 2u);
  EXPECT_EQ(Ring::SlotsFor(56), 2u);
  EXPECT_EQ(Ring::SlotsFor(120), 2u);
  EXPECT_EQ(Ring::SlotsFor(121), 3u);

  LocalRing ok(16);
  ASSERT_NE(ok.ring, nullptr);
  EXPECT_EQ(static_cast<void*>(ok.ring), static_cast<void*>(ok.mem.get()));
  EXPECT_EQ(ok.ring->slot_count(), 16u);
  EXPECT_EQ(ok.ring->MaxPayload(), 16u * 64 - 8);
  EXPECT_EQ(ok.ring->UsedSlots(), 0u);

  EXPECT_EQ(Ring::Format(ok.mem.get(), ok.bytes - 1, 16), nullptr);
  EXPECT_EQ(Ring::Format(ok.mem.get(), ok.bytes, 12), nullptr);
  EXPECT_EQ(Ring::Format(ok.mem.get() + 8, ok.bytes - 8, 8), nullptr);  // misaligned
  EXPECT_EQ(Ring::Format(nullptr, ok.bytes, 16), nullptr);

  LocalRing big(8192);
  ASSERT_NE(big.ring, nullptr);
  EXPECT_EQ(big.ring->MaxPayload(), Ring::kMaxRecordSlots * 64 - 8);
}

TEST(ShmRingTest, AttachValidatesHeader) {
  LocalRing lr(64);
  ASSERT_NE(lr.ring, nullptr);
  ASSERT_TRUE(lr.ring->TryProduce("abc", 3, nullptr, 0));
  Ring* again = Ring::Attach(lr.mem.get(), lr.bytes);
  ASSERT_EQ(again, lr.ring);
  RecordView v;
  ASSERT_TRUE(again->Peek(&v));
  EXPECT_EQ(v.size(), 3u);

  EXPECT_EQ(Ring::Attach(nullptr, lr.bytes), nullptr);
  EXPECT_EQ(Ring::Attach(lr.mem.get(), lr.bytes - 1), nullptr);  // smaller than the geometry
  EXPECT_EQ(Ring::Attach(lr.mem.get(), 16), nullptr);

  // Header layout (see ring.h): u64 magic, u32 version, u32 slot_count.
  auto corrupt = [&](size_t offset, uint32_t value) {
    std::vector<std::byte> saved(lr.mem.get(), lr.mem.get() + 64);
    std::memcpy(lr.mem.get() + offset, &value, sizeof(value));
    Ring* r = Ring::Attach(lr.mem.get(), lr.bytes);
    std::memcpy(lr.mem.get(), saved.data(), saved.size());
    return r;
  };
  EXPECT_EQ(corrupt(0, 0x12345678), nullptr);                // magic
  EXPECT_EQ(corrupt(8, Ring::kVersion + 1), nullptr);        // version
  EXPECT_EQ(corrupt(12, 63), nullptr);                       // not a power of two
  EXPECT_EQ(corrupt(12, 128), nullptr);                      // larger than the region
  EXPECT_EQ(corrupt(12, 32), nullptr);                       // disagrees with the recorded size
  EXPECT_EQ(Ring::Attach(lr.mem.get(), lr.bytes), lr.ring);  // restored

  // Random garbage, and zeroes.
  std::vector<uint64_t> garbage(4096);
  uint64_t x = 88172645463325252ull;
  for (auto& g : garbage) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    g = x;
  }
  EXPECT_EQ(Ring::Attach(garbage.data(), garbage.size() * 8), nullptr);
  std::fill(garbage.begin(), garbage.end(), 0);
  EXPECT_EQ(Ring::Attach(garbage.data(), garbage.size() * 8), nullptr);
}

TEST(ShmRingTest, SingleRecordRoundTrip) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  RecordView v;
  EXPECT_FALSE(ring->Peek(&v));

  std::vector<uint8_t> hdr = Pattern(1, 1, 48);
  std::vector<uint8_t> payload = Pattern(2, 2, 1000);
  ASSERT_TRUE(ring->TryProduce(hdr.data(), 48, payload.data(), 1000));
  EXPECT_EQ(ring->UsedSlots(), Ring::SlotsFor(1048));

  ASSERT_TRUE(ring->Peek(&v));
  ASSERT_EQ(v.size(), 1048u);
  std::vector<uint8_t> got = ReadAll(v);
  EXPECT_EQ(std::memcmp(got.data(), hdr.data(), 48), 0);
  EXPECT_EQ(std::memcmp(got.data() + 48, payload.data(), 1000), 0);
  // Peek is idempotent until Release.
  RecordView again;
  ASSERT_TRUE(ring->Peek(&again));
  EXPECT_EQ(again.first().data(), v.first().data());
  // Out-of-range copies are refused.
  uint8_t byte;
  EXPECT_FALSE(v.CopyOut(1048, &byte, 1));
  EXPECT_TRUE(v.CopyOut(1047, &byte, 1));
  EXPECT_EQ(byte, payload[999]);

  ring->Release(v);
  EXPECT_FALSE(ring->Peek(&v));
  EXPECT_EQ(ring->UsedSlots(), 0u);
}

TEST(ShmRingTest, VariableSizesWithChecksums) {
  LocalRing lr(256);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  struct Expected {
    uint32_t len;
    uint64_t sum;
  };
  std::deque<Expected> queue;
  uint64_t delivered = 0;
  auto drain = [&] {
    RecordView v;
    while (ring->Peek(&v)) {
      ASSERT_FALSE(queue.empty());
      std::vector<uint8_t> got = ReadAll(v);
      ASSERT_EQ(got.size(), queue.front().len);
      // The payload carries its own length first, then the pattern.
      if (got.size() >= 4) {
        uint32_t len;
        std::memcpy(&len, got.data(), 4);
        EXPECT_EQ(len, got.size());
      }
      EXPECT_EQ(Fnv1a(got.data(), got.size()), queue.front().sum) << "len " << got.size();
      queue.pop_front();
      ring->Release(v);
      ++delivered;
    }
  };
  for (uint32_t len = 0; len <= 4096; ++len) {
    std::vector<uint8_t> p = Pattern(3, len, len);
    if (len >= 4) std::memcpy(p.data(), &len, 4);
    Reservation r;
    if (!ring->TryReserve(len, &r)) {
      drain();
      ASSERT_TRUE(ring->TryReserve(len, &r)) << "empty ring refused " << len;
    }
    ASSERT_EQ(r.size(), len);
    // Write in two pieces to exercise offsets.
    const uint32_t half = len / 3;
    ASSERT_TRUE(r.Write(half, p.data() + half, len - half));
    ASSERT_TRUE(r.Write(0, p.data(), half));
    EXPECT_FALSE(r.Write(len, p.data(), 1));
    ring->Commit(r);
    queue.push_back({len, Fnv1a(p.data(), len)});
  }
  drain();
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(delivered, 4097u);
}

TEST(ShmRingTest, WraparoundManyLaps) {
  LocalRing lr(16);  // 1 KiB of data: records straddle the end constantly
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  const uint32_t sizes[] = {0, 1, 55, 56, 57, 100, 127, 200, 333, 500, 700, 1016};
  uint64_t wrapped = 0;
  uint64_t produced = 0;
  uint64_t consumed = 0;
  const uint64_t kRecords = 50000;  // > 3000 laps
  const auto* region_end = lr.mem.get() + lr.bytes;
  while (consumed < kRecords) {
    // Produce until full, then consume a few: exercises every alignment.
    while (produced < kRecords) {
      const uint32_t len = sizes[(produced * 7) % std::size(sizes)];
      std::vector<uint8_t> p = Pattern(4, produced, len);
      if (!ring->TryProduce(p.data(), len, nullptr, 0)) break;
      ++produced;
    }
    ASSERT_LT(consumed, produced) << "an empty ring refused record " << produced;
    const uint64_t batch = 1 + consumed % 3;
    for (uint64_t i = 0; i < batch && consumed < produced; ++i) {
      RecordView v;
      ASSERT_TRUE(ring->Peek(&v));
      const uint32_t len = sizes[(consumed * 7) % std::size(sizes)];
      ASSERT_EQ(v.size(), len);
      ASSERT_EQ(v.first().size() + v.second().size(), len);
      // Both pieces lie inside the region: nothing is read or written past it.
      ASSERT_LE(v.first().data() + v.first().size(), region_end);
      ASSERT_LE(v.second().data() + v.second().size(), region_end);
      if (!v.second().empty()) {
        ++wrapped;
        // The second piece starts at the beginning of the data array.
        EXPECT_LT(v.second().data(), v.first().data());
      }
      // Check through the raw spans, not only CopyOut.
      uint32_t i2 = 0;
      for (std::byte b : v.first()) ASSERT_EQ(uint8_t(b), PatternByte(4, consumed, i2++));
      for (std::byte b : v.second()) ASSERT_EQ(uint8_t(b), PatternByte(4, consumed, i2++));
      if (len > 10) {
        uint8_t piece[10];
        const uint32_t off = len - 10;
        ASSERT_TRUE(v.CopyOut(off, piece, 10));
        for (uint32_t k = 0; k < 10; ++k) ASSERT_EQ(piece[k], PatternByte(4, consumed, off + k));
      }
      ring->Release(v);
      ++consumed;
    }
  }
  EXPECT_EQ(ring->UsedSlots(), 0u);
  EXPECT_GT(wrapped, 1000u);
}

TEST(ShmRingTest, FullRingBackPressure) {
  LocalRing lr(16);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  Reservation r;
  EXPECT_FALSE(ring->TryReserve(ring->MaxPayload() + 1, &r));
  const int fit = static_cast<int>(16 / Ring::SlotsFor(sizeof(int)));
  for (int i = 0; i < fit; ++i) {
    ASSERT_TRUE(ring->TryProduce(&i, sizeof(i), nullptr, 0)) << i;
  }
  EXPECT_EQ(ring->UsedSlots(), 16u);
  EXPECT_FALSE(ring->TryReserve(0, &r));
  EXPECT_FALSE(ring->TryReserve(0, &r));  // failing changed nothing
  EXPECT_EQ(ring->UsedSlots(), 16u);

  RecordView v;
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
  int x = fit;
  EXPECT_TRUE(ring->TryProduce(&x, sizeof(x), nullptr, 0));
  EXPECT_FALSE(ring->TryReserve(0, &r));
  for (int expect = 1; expect <= fit; ++expect) {
    ASSERT_TRUE(ring->Peek(&v));
    int got = -1;
    ASSERT_TRUE(v.CopyOut(0, &got, sizeof(got)));
    EXPECT_EQ(got, expect);
    ring->Release(v);
  }
  EXPECT_FALSE(ring->Peek(&v));

  // Multi-slot records: after 10 of 16 slots, 7 slots do not fit, 6 do.
  std::vector<uint8_t> buf(ring->MaxPayload(), 7);
  ASSERT_TRUE(ring->TryProduce(buf.data(), 10 * 64 - 8, nullptr, 0));
  EXPECT_FALSE(ring->TryProduce(buf.data(), 7 * 64 - 8, nullptr, 0));
  EXPECT_TRUE(ring->TryProduce(buf.data(), 6 * 64 - 8, nullptr, 0));
  EXPECT_FALSE(ring->TryReserve(0, &r));
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
  // A record as large as the whole ring fits only when it is empty.
  EXPECT_TRUE(ring->TryProduce(buf.data(), ring->MaxPayload(), nullptr, 0));
  EXPECT_FALSE(ring->TryReserve(0, &r));
  ASSERT_TRUE(ring->Peek(&v));
  EXPECT_EQ(v.size(), ring->MaxPayload());
  ring->Release(v);
}

TEST(ShmRingTest, DeliveryInReservationOrder) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  Reservation a, b;
  ASSERT_TRUE(ring->TryReserve(4, &a));
  ASSERT_TRUE(ring->TryReserve(4, &b));
  uint32_t va = 0xaaaa, vb = 0xbbbb;
  b.Write(0, &vb, 4);
  ring->Commit(b);
  RecordView v;
  EXPECT_FALSE(ring->Peek(&v));  // a is reserved but not committed
  a.Write(0, &va, 4);
  ring->Commit(a);
  uint32_t got;
  ASSERT_TRUE(ring->Peek(&v));
  v.CopyOut(0, &got, 4);
  EXPECT_EQ(got, va);
  ring->Release(v);
  ASSERT_TRUE(ring->Peek(&v));
  v.CopyOut(0, &got, 4);
  EXPECT_EQ(got, vb);
  ring->Release(v);
}

TEST(ShmRingTest, CancelledReservationIsSkipped) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  Reservation a, b;
  ASSERT_TRUE(ring->TryReserve(300, &a));
  ASSERT_TRUE(ring->TryReserve(4, &b));
  uint32_t vb = 0xb0b;
  b.Write(0, &vb, 4);
  ring->Commit(b);
  ring->Cancel(a);
  RecordView v;
  ASSERT_TRUE(ring->Peek(&v));
  uint32_t got = 0;
  v.CopyOut(0, &got, 4);
  EXPECT_EQ(got, vb);
  ring->Release(v);
  EXPECT_FALSE(ring->Peek(&v));
  EXPECT_EQ(ring->UsedSlots(), 0u);
}

// A cancelled record is published like a commit: the application's drain
// (which only looks at ready heads) must take it out of the way.
TEST(ShmRingTest, CancelledHeadIsReadyAndDropped) {
  LocalRing lr(8);
  Ring* ring = lr.ring;
  Reservation a;
  ASSERT_TRUE(ring->TryReserve(100, &a));
  EXPECT_TRUE(ring->PublishStalledClaim());
  EXPECT_EQ(ring->Head(), Ring::HeadState::kPending);
  EXPECT_FALSE(ring->HeadReady());
  ring->Cancel(a);
  EXPECT_EQ(ring->Head(), Ring::HeadState::kReady);
  EXPECT_TRUE(ring->HeadReady());
  RecordView v;
  EXPECT_FALSE(ring->Peek(&v));
  EXPECT_TRUE(ring->HeadEmpty());
  EXPECT_EQ(ring->UsedSlots(), 0u);
}

// Two reservations in flight never share a slot, and commits out of order
// are delivered in reservation order, lap after lap (with records still in
// flight, so helping also meets words of the previous lap's records).
TEST(ShmRingTest, ClaimsNeverShareASlot) {
  LocalRing lr(16);
  Ring* ring = lr.ring;
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 2000; ++round) {
    Reservation a, b;
    const uint32_t la = 8 + (round % 3) * 64, lb = 8 + (round % 5) * 40;
    ASSERT_TRUE(ring->TryReserve(la, &a)) << round;
    ASSERT_TRUE(ring->TryReserve(lb, &b)) << round;
    ASSERT_NE(a.first().data(), b.first().data());
    // Commit out of order: b waits for a.
    const uint64_t ia = next_in++, ib = next_in++;
    b.Write(0, &ib, 8);
    ring->Commit(b);
    a.Write(0, &ia, 8);
    ring->Commit(a);
    RecordView v;
    while (ring->Peek(&v)) {
      uint64_t got = ~0ull;
      v.CopyOut(0, &got, 8);
      ASSERT_EQ(got, next_out++);
      ring->Release(v);
    }
  }
  EXPECT_EQ(next_out, next_in);
}

// Reservation::Write copies up to 64 bytes of a run-time length inline
// (overlapping loads and stores, by size class): every length and offset,
// in records that fit before the end of the data array and in records that
// wrap, lands byte for byte.
TEST(ShmRingTest, WriteOfEverySmallLength) {
  LocalRing lr(8);  // 512 bytes: records of up to 4 slots wrap often
  Ring* ring = lr.ring;
  uint64_t seq = 0;
  for (uint32_t len = 0; len <= 80; ++len) {
    for (uint32_t off : {0u, 1u, 7u, 8u, 13u, 48u}) {
      const uint32_t total = off + len + 3;  // bytes after the copy must stay
      std::vector<uint8_t> fill(total, 0xee);
      const std::vector<uint8_t> data = Pattern(7, seq, len);
      Reservation r;
      ASSERT_TRUE(ring->TryReserve(total, &r)) << len << " " << off;
      ASSERT_TRUE(r.Write(0, fill.data(), total));
      ASSERT_TRUE(r.Write(off, data.data(), len));
      if (len != 0) {
        EXPECT_FALSE(r.Write(total - len + 1, data.data(), len));  // past the end
      }
      ring->Commit(r);
      RecordView v;
      ASSERT_TRUE(ring->Peek(&v));
      std::vector<uint8_t> got = ReadAll(v);
      ASSERT_EQ(got.size(), total);
      for (uint32_t i = 0; i < total; ++i) {
        const uint8_t want = (i >= off && i < off + len) ? data[i - off] : 0xee;
        ASSERT_EQ(got[i], want) << "len " << len << " off " << off << " byte " << i;
      }
      ring->Release(v);
      ++seq;
    }
  }
}

// A reservation after one that is not committed yet takes the general
// path (published_end is not at reserve_pos), which first writes the
// earlier claim into its seq word ("helping"): the head then reads as
// pending, and stays so while the later record commits. Both are delivered,
// each once, in reservation order, lap after lap with records of several
// sizes (so that helping also meets seq words of the previous lap).
TEST(ShmRingTest, ReservingAfterAnUncommittedRecordPublishesItsClaim) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  for (int round = 0; round < 200; ++round) {
    const uint64_t before = ring->ReservedSlots();
    Reservation a;
    const uint32_t la = 8 + (round % 4) * 64;
    ASSERT_TRUE(ring->TryReserve(la, &a));
    EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty) << round;  // only in the reserve word
    Reservation b;
    ASSERT_TRUE(ring->TryReserve(8, &b));
    EXPECT_EQ(ring->ReservedSlots(), before + Ring::SlotsFor(la) + Ring::SlotsFor(8));
    EXPECT_NE(a.first().data(), b.first().data());
    EXPECT_EQ(ring->Head(), Ring::HeadState::kPending) << round;  // a's claim, published
    EXPECT_FALSE(ring->PublishStalledClaim());  // the head's claim is there already
    const uint64_t ia = 2 * round, ib = 2 * round + 1;
    b.Write(0, &ib, 8);
    ring->Commit(b);
    RecordView v;
    EXPECT_FALSE(ring->Peek(&v));  // b waits for a
    EXPECT_EQ(ring->Head(), Ring::HeadState::kPending);
    a.Write(0, &ia, 8);
    ring->Commit(a);
    for (uint64_t want : {ia, ib}) {
      ASSERT_TRUE(ring->Peek(&v));
      EXPECT_EQ(v.size(), want == ia ? la : 8u);
      uint64_t got = ~0ull;
      v.CopyOut(0, &got, 8);
      ASSERT_EQ(got, want);
      ring->Release(v);
    }
    EXPECT_FALSE(ring->Peek(&v));
    EXPECT_EQ(ring->UsedSlots(), 0u);
  }
}

// PublishStalledClaim writes only the claim of the record at the head, and
// only while that claim is alone in the reserve word: never into a slot of
// a record behind the head, never over a commit, never on an empty ring.
TEST(ShmRingTest, PublishStalledClaimTouchesOnlyALoneHeadClaim) {
  LocalRing lr(16);
  Ring* ring = lr.ring;
  EXPECT_FALSE(ring->PublishStalledClaim());  // nothing reserved
  EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty);
  uint64_t x = 1;
  ASSERT_TRUE(ring->TryProduce(&x, 8, nullptr, 0));
  EXPECT_FALSE(ring->PublishStalledClaim());  // committed
  EXPECT_EQ(ring->Head(), Ring::HeadState::kReady);
  Reservation later;
  ASSERT_TRUE(ring->TryReserve(100, &later));
  EXPECT_FALSE(ring->PublishStalledClaim());  // not the head's record
  RecordView v;
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
  EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty);
  EXPECT_TRUE(ring->PublishStalledClaim());  // now it is
  EXPECT_EQ(ring->Head(), Ring::HeadState::kPending);
  later.Write(0, &x, 8);
  ring->Commit(later);
  ASSERT_TRUE(ring->Peek(&v));
  EXPECT_EQ(v.size(), 100u);
  ring->Release(v);
  EXPECT_FALSE(ring->PublishStalledClaim());
  EXPECT_EQ(ring->Head(), Ring::HeadState::kEmpty);
  EXPECT_EQ(ring->UsedSlots(), 0u);
}

// The straight attempt also gives way when the ring looks full by the
// producers' stale copy of the consumer position: the loop reads the
// consumer's own word and reserves. Records of every size across many laps.
TEST(ShmRingTest, StaleConsumerCopyIsRefreshed) {
  LocalRing lr(16);
  Ring* ring = lr.ring;
  uint64_t in = 0, out = 0;
  for (int round = 0; round < 500; ++round) {
    // Fill until full, then drain everything: the next reservation meets a
    // stale consume_seen that says "full".
    Reservation r;
    uint32_t len = 8 + (round % 7) * 50;
    while (ring->TryReserve(len, &r)) {
      r.Write(0, &in, 8);
      ++in;
      ring->Commit(r);
    }
    RecordView v;
    while (ring->Peek(&v)) {
      uint64_t got = ~0ull;
      v.CopyOut(0, &got, 8);
      ASSERT_EQ(got, out++);
      ring->Release(v);
    }
    ASSERT_EQ(ring->UsedSlots(), 0u);
  }
  EXPECT_EQ(in, out);
  EXPECT_GT(in, 1000u);
}

TEST(ShmRingTest, ConsumerLockExcludes) {
  LocalRing lr(16);
  Ring* ring = lr.ring;
  ASSERT_TRUE(ring->TryLockConsumer());
  EXPECT_FALSE(ring->TryLockConsumer());
  std::thread([&] { EXPECT_FALSE(ring->TryLockConsumer()); }).join();
  ring->UnlockConsumer();
  bool other = false;
  std::thread([&] {
    other = ring->TryLockConsumer();
    if (other) ring->UnlockConsumer();
  }).join();
  EXPECT_TRUE(other);
}
}  // namespace
}  // namespace softrdma::shm
