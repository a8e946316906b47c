// Unit tests of the shm ring under concurrency: many producer threads, producers
// in other processes, and the sleep/wake protocol. Every wait is bounded.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "shm_ring_test_util.h"

namespace softrdma::shm {
namespace {

using namespace softrdma::shm::ringtest;
using namespace std::chrono_literals;

struct Msg {
  uint32_t producer;
  uint32_t len;  // pattern bytes after this header
  uint64_t seq;
};

// Producer loop shared by the thread and process tests: up to `count`
// records, fewer if `stop_at` passes first (see ProduceAndConsumeAll).
// Returns how many it produced, or -1 if the deadline passed while it
// waited for space. Payload lengths run over [0, max_len).
int64_t ProduceStream(Ring* ring, uint32_t producer, uint64_t count, Clock::time_point deadline,
                      uint32_t max_len = 300,
                      Clock::time_point stop_at = Clock::time_point::max()) {
  std::vector<uint8_t> payload;
  uint64_t seq = 0;
  for (; seq < count && Clock::now() < stop_at; ++seq) {
    Msg m{producer, static_cast<uint32_t>((seq * 13 + producer) % max_len), seq};
    payload = Pattern(producer, seq, m.len);
    RetryPause pause;
    while (!ring->TryProduce(&m, sizeof(m), payload.data(), m.len)) {
      if (Clock::now() > deadline) return -1;
      pause();
    }
  }
  return static_cast<int64_t>(seq);
}

// What the consumer must see: `expected[p]` records of producer p, final
// once `running` is 0 (each producer adds its count before it leaves).
struct Streams {
  explicit Streams(uint32_t producers) : expected(producers), running(producers) {}
  std::vector<std::atomic<uint64_t>> expected;
  std::atomic<uint32_t> running;
  void Finished(uint32_t producer, uint64_t produced) {
    expected[producer].store(produced);
    running.fetch_sub(1);
  }
};

// Consumes until every producer has finished and delivered what it
// produced, checking order per producer and contents. Returns the number of
// records consumed.
uint64_t ConsumeStreams(Ring* ring, Streams* streams, Clock::time_point deadline) {
  const uint32_t producers = static_cast<uint32_t>(streams->expected.size());
  std::vector<uint64_t> next(producers, 0);
  uint64_t total = 0;
  bool bad = false;
  RetryPause pause;
  const auto delivered_all = [&] {
    if (streams->running.load() != 0) return false;
    for (uint32_t p = 0; p < producers; ++p)
      if (next[p] < streams->expected[p].load()) return false;
    return true;
  };
  while (!bad) {
    const size_t n = ring->ConsumeBatch(32, [&](const RecordView& v) {
      Msg m;
      if (v.size() < sizeof(m) || !v.CopyOut(0, &m, sizeof(m)) || m.producer >= producers ||
          v.size() != sizeof(m) + m.len || m.seq != next[m.producer]) {
        ADD_FAILURE() << "bad record: size " << v.size() << " producer " << m.producer << " seq "
                      << m.seq;
        bad = true;
        return;
      }
      std::vector<uint8_t> got(m.len);
      v.CopyOut(sizeof(m), got.data(), m.len);
      if (got != Pattern(m.producer, m.seq, m.len)) {
        ADD_FAILURE() << "payload mismatch producer " << m.producer << " seq " << m.seq;
        bad = true;
      }
      ++next[m.producer];
    });
    total += n;
    if (n == 0) {
      if (delivered_all()) break;
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "timed out after " << total << " records";
        break;
      }
      pause();
    }
  }
  for (uint32_t p = 0; p < producers && !bad; ++p)
    EXPECT_EQ(next[p], streams->expected[p].load()) << "records of producer " << p;
  return total;
}

// Starts one thread per producer running produce(p, deadline, stop_at)
// (the number of records it produced, -1: it gave up at the deadline),
// consumes every stream on this thread, joins, and checks that every record
// came once and the ring ended empty. A producer stops after per_producer
// records or at stop_at (10 s), whichever comes first: on an idle machine
// every test here produces everything in well under a second, but at nice
// 19 on a loaded one each hand-off between consumer and producers waits for
// a time slice and a run took 40-120 s (the deadline is 100 s, ctest's
// limit 120 s). Each producer must still produce kMinPerProducer records
// (4 x 500 records of two or three slots: a 32-slot ring wraps 60 times).
template <typename Produce>
void ProduceAndConsumeAll(Ring* ring, uint32_t producers, uint64_t per_producer, Produce produce) {
  constexpr uint64_t kMinPerProducer = 500;
  const auto stop_at = Clock::now() + 10s;
  const auto deadline = Clock::now() + 100s;
  std::atomic<int> failures{0};
  Streams streams(producers);
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      const int64_t produced = produce(p, deadline, stop_at);
      if (produced < 0) failures.fetch_add(1);
      streams.Finished(p, produced < 0 ? 0 : static_cast<uint64_t>(produced));
    });
  }
  const bool locked = ring->TryLockConsumer();
  EXPECT_TRUE(locked);
  const uint64_t total = ConsumeStreams(ring, &streams, deadline);
  if (locked) ring->UnlockConsumer();
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  uint64_t expected = 0;
  for (uint32_t p = 0; p < producers; ++p) {
    const uint64_t produced = streams.expected[p].load();
    EXPECT_GE(produced, std::min(per_producer, kMinPerProducer)) << "producer " << p;
    expected += produced;
  }
  EXPECT_EQ(total, expected);
  RecordView v;
  EXPECT_FALSE(ring->Peek(&v));  // nothing duplicated past the end
  EXPECT_EQ(ring->UsedSlots(), 0u);
  ::testing::Test::RecordProperty("records", static_cast<int>(total));
}

TEST(ShmRingConcurrencyTest, ManyProducerThreadsNoLossNoDuplicate) {
  LocalRing lr(1024);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  ProduceAndConsumeAll(ring, 4, 100000,
                       [&](uint32_t p, Clock::time_point deadline, Clock::time_point stop_at) {
                         return ProduceStream(ring, p, 100000, deadline, 300, stop_at);
                       });
}

// Only small records (header and data of at most 64 bytes: TryProduce's
// straight path whenever the record does not wrap and the reserve CAS is
// not lost) from several threads into a small ring, so that reservations
// collide, producers publish the claims of records still being written by
// others (helping), the ring fills and records wrap: every record arrives
// once, in order per producer, intact.
TEST(ShmRingConcurrencyTest, SmallRecordsFromManyThreadsOnASmallRing) {
  LocalRing lr(32);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  ProduceAndConsumeAll(ring, 4, 50000,
                       [&](uint32_t p, Clock::time_point deadline, Clock::time_point stop_at) {
                         return ProduceStream(ring, p, 50000, deadline, 65, stop_at);
                       });
}

// A producer's pause between reserve and commit: ~5 us of spinning, in which
// the threads on the other CPU meet its claim (a yield here handed the CPU
// to any busy process for a slice when the machine was loaded), and a yield
// at every 64th, so that a thread of this CPU meets it too.
void Linger() {
  static thread_local uint32_t lingers = 0;
  if (++lingers % 64 == 0) {
    std::this_thread::yield();
    return;
  }
  for (int i = 0; i < 256; ++i) __builtin_ia32_pause();
}

// Producers that linger between reserve and commit (Linger after every
// third reservation), so that most reservations meet a claim that is only
// in the reserve word and must publish it first, while another thread keeps
// calling PublishStalledClaim (as the progress thread does) and so races
// the producers' helping CASes and commits and the consumer's resets: every
// record arrives once, in order per producer, intact, and the ring ends
// empty with no record taken for a dead producer's.
TEST(ShmRingConcurrencyTest, LingeringProducersAndStalledClaimPublisher) {
  constexpr uint64_t kPerProducer = 30000;
  LocalRing lr(64);
  Ring* ring = lr.ring;
  ASSERT_NE(ring, nullptr);
  std::atomic<bool> producing{true};
  std::atomic<uint64_t> published{0};
  std::thread publisher([&] {
    RetryPause pause;
    while (producing.load()) {
      if (ring->PublishStalledClaim()) published.fetch_add(1);
      pause();
    }
  });
  ProduceAndConsumeAll(
      ring, 3, kPerProducer,
      [&](uint32_t p, Clock::time_point deadline, Clock::time_point stop_at) -> int64_t {
        uint64_t seq = 0;
        for (; seq < kPerProducer && Clock::now() < stop_at; ++seq) {
          Msg m{p, static_cast<uint32_t>((seq * 13 + p) % 200), seq};
          const std::vector<uint8_t> payload = Pattern(p, seq, m.len);
          Reservation r;
          RetryPause pause;
          while (!ring->TryReserve(sizeof(m) + m.len, &r)) {
            if (Clock::now() > deadline) return -1;
            pause();
          }
          r.Write(0, &m, sizeof(m));
          if (seq % 3 == 0) Linger();
          r.Write(sizeof(m), payload.data(), m.len);
          ring->Commit(r);
        }
        return static_cast<int64_t>(seq);
      });
  producing.store(false);
  publisher.join();
  EXPECT_EQ(ring->dead_records_skipped(), 0u);
  RecordProperty("stalled_claims_published", static_cast<int>(published.load()));
}

TEST(ShmRingConcurrencyTest, ProducersInForkedProcesses) {
  constexpr uint32_t kProducers = 2;
  constexpr uint64_t kPerProducer = 30000;
  ShmNameGuard name{UniqueShmName("fork")};
  ShmRegion region;
  ASSERT_TRUE(ShmRegion::Create(name.name, Ring::RegionBytes(512), &region).ok());
  Ring* ring = Ring::Format(region.data(), region.size(), 512);
  ASSERT_NE(ring, nullptr);

  ChildGuard children[kProducers];
  for (uint32_t p = 0; p < kProducers; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: map the object afresh (another address) and produce. No gtest
      // macros here; the exit code reports.
      ShmRegion mine;
      if (!ShmRegion::Open(name.name, &mine).ok()) _exit(3);
      Ring* r = Ring::Attach(mine.data(), mine.size());
      if (r == nullptr || r == ring) _exit(4);
      _exit(ProduceStream(r, p, kPerProducer, Clock::now() + 60s) ==
                    static_cast<int64_t>(kPerProducer)
                ? 0
                : 5);
    }
    children[p].pid = pid;
  }
  Streams streams(kProducers);
  for (uint32_t p = 0; p < kProducers; ++p) streams.Finished(p, kPerProducer);
  const uint64_t total = ConsumeStreams(ring, &streams, Clock::now() + 60s);
  EXPECT_EQ(total, kProducers * kPerProducer);
  for (auto& c : children) EXPECT_EQ(c.Wait(), 0);
  RecordView v;
  EXPECT_FALSE(ring->Peek(&v));
}

TEST(ShmRingConcurrencyTest, SleepIsWokenByProducer) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  RecordView v;
  const uint32_t w = ring->PrepareToWait();
  ASSERT_TRUE(ring->AnnounceSleep());  // empty ring: the announcement covers all
  ASSERT_FALSE(ring->Peek(&v));
  std::thread producer([&] {
    std::this_thread::sleep_for(50ms);
    uint64_t x = 42;
    EXPECT_TRUE(ring->TryProduce(&x, 8, nullptr, 0));
  });
  const auto t0 = Clock::now();
  Ring::WakeReason why = Ring::WakeReason::kInterrupted;
  while (why == Ring::WakeReason::kInterrupted) why = ring->Sleep(w, 5'000'000'000);
  const auto slept = Clock::now() - t0;
  ring->FinishSleep();
  producer.join();
  EXPECT_EQ(why, Ring::WakeReason::kWoken);
  EXPECT_LT(slept, 4s);
  EXPECT_NE(ring->wake_word(), w);
  ASSERT_TRUE(ring->Peek(&v));
  uint64_t got = 0;
  v.CopyOut(0, &got, 8);
  EXPECT_EQ(got, 42u);
  ring->Release(v);
}

TEST(ShmRingConcurrencyTest, SleepTimesOut) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  const uint32_t w = ring->PrepareToWait();
  ASSERT_TRUE(ring->AnnounceSleep());
  const auto t0 = Clock::now();
  Ring::WakeReason why = Ring::WakeReason::kInterrupted;
  while (why == Ring::WakeReason::kInterrupted) why = ring->Sleep(w, 20'000'000);
  const auto slept = Clock::now() - t0;
  ring->FinishSleep();
  EXPECT_EQ(why, Ring::WakeReason::kTimedOut);
  EXPECT_GE(slept, 15ms);
  EXPECT_LT(slept, 2s);
}

TEST(ShmRingConcurrencyTest, ProducersOnlyWakeASleepingConsumer) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  const uint32_t before = ring->wake_word();
  ASSERT_TRUE(ring->TryProduce("a", 1, nullptr, 0));
  EXPECT_EQ(ring->wake_word(), before);  // awake consumer: no futex traffic
  RecordView v;
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);

  // A record committed between the announcement and Sleep (the lost-wake-up
  // window) makes Sleep return at once instead of sleeping.
  const uint32_t w = ring->PrepareToWait();
  ASSERT_TRUE(ring->AnnounceSleep());
  ASSERT_TRUE(ring->TryProduce("b", 1, nullptr, 0));
  EXPECT_NE(ring->wake_word(), w);
  const auto t0 = Clock::now();
  EXPECT_EQ(ring->Sleep(w, 5'000'000'000), Ring::WakeReason::kWoken);
  EXPECT_LT(Clock::now() - t0, 1s);
  ring->FinishSleep();
  // Only the first record after an announcement wakes: it took the marker.
  const uint32_t after = ring->wake_word();
  ASSERT_TRUE(ring->TryProduce("c", 1, nullptr, 0));
  EXPECT_EQ(ring->wake_word(), after);
}

// What an announcement covers: the records reserved after it. One reserved
// before it and not consumed yet makes AnnounceSleep say "not covered" (its
// commit sends no wake-up); with everything consumed it covers again.
TEST(ShmRingConcurrencyTest, AnnouncementCoversOnlyRecordsReservedAfterIt) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  Reservation r;
  ASSERT_TRUE(ring->TryReserve(8, &r));
  EXPECT_FALSE(ring->AnnounceSleep());
  const uint32_t w = ring->wake_word();
  ring->Commit(r);
  EXPECT_EQ(ring->wake_word(), w);      // reserved before the announcement: no wake-up
  EXPECT_FALSE(ring->AnnounceSleep());  // committed, still not consumed
  RecordView v;
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
  EXPECT_TRUE(ring->AnnounceSleep());
  EXPECT_TRUE(ring->AnnounceSleep());  // announced twice: one marker
  ASSERT_TRUE(ring->TryReserve(8, &r));
  ring->Commit(r);
  EXPECT_NE(ring->wake_word(), w);  // reserved after it: woken
  ASSERT_TRUE(ring->Peek(&v));
  ring->Release(v);
}

// A consumer that sleeps whenever the ring looks empty, for as long as its
// announcement allows: a whole second when it covers every record, else
// Ring::kUncoveredSleepNs. Any lost wake-up shows up as a covered sleep that
// timed out. `producers` threads, each pausing now and then so that the
// consumer sleeps often, and a small ring so that they also find it full.
// Fails when producers commit without waking (e.g. a commit that ignores
// the marker, or an AnnounceSleep that claims to cover a record reserved
// before it).
void SleepWakeStress(uint32_t producers, uint64_t per_producer) {
  LocalRing lr(64);
  Ring* ring = lr.ring;
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < producers; ++p) {
    threads.emplace_back([ring, p, per_producer] {
      const auto deadline = Clock::now() + 60s;
      for (uint64_t i = 0; i < per_producer; ++i) {
        const uint64_t value = (uint64_t{p} << 32) | i;
        if (i % 4 == 1) {
          // Reserve, pause, then commit: the consumer often announces its
          // sleep while this record is outstanding (not covered).
          Reservation r;
          while (!ring->TryReserve(sizeof(value), &r)) {
            if (Clock::now() > deadline) return;
            std::this_thread::yield();
          }
          r.Write(0, &value, sizeof(value));
          std::this_thread::sleep_for(std::chrono::microseconds(i % 20));
          ring->Commit(r);
        } else {
          while (!ring->TryProduce(&value, sizeof(value), nullptr, 0)) {
            if (Clock::now() > deadline) return;
            std::this_thread::yield();
          }
        }
        if (i % 8 == p % 8) std::this_thread::sleep_for(std::chrono::microseconds(i % 50));
      }
    });
  }
  std::vector<uint64_t> next(producers, 0);
  uint64_t total = 0;
  int covered_timeouts = 0, sleeps = 0;
  bool bad = false;
  const auto deadline = Clock::now() + 60s;
  while (total < producers * per_producer && Clock::now() < deadline && !bad &&
         covered_timeouts == 0) {
    RecordView v;
    if (ring->Peek(&v)) {
      uint64_t got = ~0ull;
      v.CopyOut(0, &got, sizeof(got));
      const uint32_t p = static_cast<uint32_t>(got >> 32);
      if (p >= producers || (got & 0xffffffffu) != next[p]) {
        ADD_FAILURE() << "bad record " << std::hex << got;
        bad = true;
      } else {
        ++next[p];
      }
      ring->Release(v);
      ++total;
      continue;
    }
    const uint32_t w = ring->PrepareToWait();
    const bool covered = ring->AnnounceSleep();
    if (!ring->Peek(&v)) {
      ++sleeps;
      const Ring::WakeReason why =
          ring->Sleep(w, covered ? 1'000'000'000 : Ring::kUncoveredSleepNs);
      if (covered && why == Ring::WakeReason::kTimedOut) ++covered_timeouts;
    }
    ring->FinishSleep();
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(total, producers * per_producer);
  EXPECT_EQ(covered_timeouts, 0) << "lost wake-ups in " << sleeps << " sleeps";
  EXPECT_GT(sleeps, 0);  // the handshake was exercised
}

TEST(ShmRingConcurrencyTest, SleepWakeStressLosesNoWakeUp) {
  SleepWakeStress(1, 8000);
}

TEST(ShmRingConcurrencyTest, SleepWakeStressWithManyProducersLosesNoWakeUp) {
  SleepWakeStress(4, 4000);
}

// A producer killed between reserve and commit: the consumer skips its record
}  // namespace
}  // namespace softrdma::shm
