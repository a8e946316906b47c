// MR key lookup and access checks of the per-process MR table.
#include "core/mr_table.h"

#include <atomic>
#include <cerrno>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace softrdma {
namespace {

class MrTableTest : public ::testing::Test {
 protected:
  MrTableTest() : storage_(new MrEntry[MrTable::kCapacity]()), table_(storage_.get()) {}
  std::unique_ptr<MrEntry[]> storage_;
  MrTable table_;
};

TEST_F(MrTableTest, KeysAreDistinctAndResolve) {
  uint32_t lkey = 0, rkey = 0;
  ASSERT_EQ(table_.Add(/*pd=*/7, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 0x10000, 4096,
                       0x7f0000001000, &lkey, &rkey),
            0);
  EXPECT_NE(lkey, 0u);
  EXPECT_NE(rkey, 0u);
  EXPECT_NE(lkey, rkey);
  uint64_t host = 0;
  // Key space address 0x10010 is 16 bytes into the region.
  ASSERT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 0x10010, 32, 7, 0, &host), 0);
  EXPECT_EQ(host, 0x7f0000001010u);
  ASSERT_EQ(table_.Lookup(KeyKind::kRemote, rkey, 0x10000, 4096, 7, IBV_ACCESS_REMOTE_READ, &host),
            0);
  EXPECT_EQ(host, 0x7f0000001000u);
  // An lkey is not an rkey and vice versa.
  EXPECT_EQ(table_.Lookup(KeyKind::kRemote, lkey, 0x10000, 1, 7, 0, &host), EINVAL);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, rkey, 0x10000, 1, 7, 0, &host), EINVAL);
}

TEST_F(MrTableTest, BoundsAreChecked) {
  uint32_t lkey, rkey;
  ASSERT_EQ(table_.Add(1, IBV_ACCESS_LOCAL_WRITE, 1000, 100, 5000, &lkey, &rkey), 0);
  uint64_t host;
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 1000, 100, 1, 0, &host), 0);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 1099, 1, 1, 0, &host), 0);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 1099, 2, 1, 0, &host), ERANGE);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 999, 1, 1, 0, &host), ERANGE);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 1000, 101, 1, 0, &host), ERANGE);
  // Overflowing address arithmetic must not wrap into range.
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, ~0ull - 10, 20, 1, 0, &host), ERANGE);
}

TEST_F(MrTableTest, AccessAndPdAreChecked) {
  uint32_t lkey, rkey;
  ASSERT_EQ(table_.Add(3, IBV_ACCESS_REMOTE_READ, 0, 64, 64, &lkey, &rkey), 0);
  uint64_t host;
  EXPECT_EQ(table_.Lookup(KeyKind::kRemote, rkey, 0, 8, 3, IBV_ACCESS_REMOTE_WRITE, &host), EACCES);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, lkey, 0, 8, 3, IBV_ACCESS_LOCAL_WRITE, &host), EACCES);
  EXPECT_EQ(table_.Lookup(KeyKind::kRemote, rkey, 0, 8, 4, IBV_ACCESS_REMOTE_READ, &host), EACCES)
      << "another PD";
  EXPECT_EQ(table_.Lookup(KeyKind::kRemote, rkey, 0, 8, 3, IBV_ACCESS_REMOTE_READ, &host), 0);
}

TEST_F(MrTableTest, StaleKeysNeverRevalidate) {
  // Register and deregister many times: no key ever handed out may resolve
  // once its region is gone, whatever was registered since.
  std::set<uint32_t> dead;
  uint64_t host;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<uint32_t, uint32_t>> keys;
    for (uint32_t i = 0; i < MrTable::kCapacity - 1; ++i) {
      uint32_t l, r;
      ASSERT_EQ(table_.Add(1, IBV_ACCESS_LOCAL_WRITE, 0, 8, 8, &l, &r), 0);
      EXPECT_EQ(dead.count(l), 0u) << "a dead lkey came back";
      EXPECT_EQ(dead.count(r), 0u) << "a dead rkey came back";
      keys.emplace_back(l, r);
    }
    uint32_t l, r;
    EXPECT_EQ(table_.Add(1, 0, 0, 8, 8, &l, &r), ENOMEM) << "table full";
    for (auto [l2, r2] : keys) {
      table_.Remove(l2);
      EXPECT_EQ(table_.Lookup(KeyKind::kLocal, l2, 0, 8, 1, 0, &host), EINVAL);
      EXPECT_EQ(table_.Lookup(KeyKind::kRemote, r2, 0, 8, 1, 0, &host), EINVAL);
    }
    // A key byte may repeat only after its index was reused with a different
    // byte in between; within one reuse it never does, which is what we track.
    dead.clear();
    for (auto [l2, r2] : keys) {
      dead.insert(l2);
      dead.insert(r2);
    }
  }
}

TEST_F(MrTableTest, UnknownKeys) {
  uint64_t host;
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, 0, 0, 1, 0, 0, &host), EINVAL);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, 0xffffffff, 0, 1, 0, 0, &host), EINVAL);
  EXPECT_EQ(table_.Lookup(KeyKind::kLocal, 5u << 8, 0, 1, 0, 0, &host), EINVAL);
}

// LookupLocal (what every lkey check uses) answers as Lookup(kLocal) did:
// the same codes in the same order of precedence.
TEST_F(MrTableTest, LocalLookupGivesTheDocumentedErrors) {
  uint32_t lkey = 0, rkey = 0;
  ASSERT_EQ(table_.Add(3, IBV_ACCESS_LOCAL_WRITE, 0x2000, 256, 0x9000, &lkey, &rkey), 0);
  uint64_t host = 0;
  EXPECT_EQ(table_.LookupLocal(lkey, 0x2010, 16, 3, IBV_ACCESS_LOCAL_WRITE, &host), 0);
  EXPECT_EQ(host, 0x9010u);
  EXPECT_EQ(table_.LookupLocal(rkey, 0x2010, 16, 3, 0, &host), EINVAL);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x2010, 16, 4, 0, &host), EACCES);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x2010, 16, 3, IBV_ACCESS_REMOTE_WRITE, &host), EACCES);
  // PD before bounds, key before PD.
  EXPECT_EQ(table_.LookupLocal(lkey, 0x1000, 16, 4, 0, &host), EACCES);
  EXPECT_EQ(table_.LookupLocal(lkey ^ 1, 0x1000, 16, 4, 0, &host), EINVAL);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x1fff, 16, 3, 0, &host), ERANGE);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x20f1, 16, 3, 0, &host), ERANGE);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x2000, 257, 3, 0, &host), ERANGE);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x20f0, 16, 3, 0, &host), 0);
  ASSERT_EQ(table_.Remove(lkey), 0);
  EXPECT_EQ(table_.LookupLocal(lkey, 0x2010, 16, 3, 0, &host), EINVAL);
}

// The SGE list beyond one SGE (ResolveSgesList): empty SGEs skipped, the
// limit cuts the last iovec, one bad SGE fails the whole list.
TEST_F(MrTableTest, SgeListsResolveAndFailAsAWhole) {
  uint32_t lkey = 0, rkey = 0;
  ASSERT_EQ(table_.Add(1, IBV_ACCESS_LOCAL_WRITE, 0x1000, 4096, 0x50000, &lkey, &rkey), 0);
  ibv_sge sges[3] = {{0x1000, 8, lkey}, {0x1100, 0, 0xdead}, {0x1200, 100, lkey}};
  iovec out[3];
  ASSERT_EQ(table_.ResolveSges(sges, 3, 1, IBV_ACCESS_LOCAL_WRITE, out, 50), 2);
  EXPECT_EQ(out[0].iov_base, reinterpret_cast<void*>(0x50000));
  EXPECT_EQ(out[0].iov_len, 8u);
  EXPECT_EQ(out[1].iov_base, reinterpret_cast<void*>(0x50200));
  EXPECT_EQ(out[1].iov_len, 42u);
  sges[2].length = 5000;  // past the region
  EXPECT_EQ(table_.ResolveSges(sges, 3, 1, IBV_ACCESS_LOCAL_WRITE, out), -1);
  // One SGE (the inline case) with a limit.
  ASSERT_EQ(table_.ResolveSges(sges, 1, 1, IBV_ACCESS_LOCAL_WRITE, out, 3), 1);
  EXPECT_EQ(out[0].iov_len, 3u);
  sges[0].lkey = rkey;
  EXPECT_EQ(table_.ResolveSges(sges, 1, 1, IBV_ACCESS_LOCAL_WRITE, out), -1);
}

// Another thread of the process deregistering (and registering anew) while
// lookups run: a lookup either fails or gives the address of the very
// region its key names, never a torn mix of an old and a new entry.
TEST_F(MrTableTest, LocalLookupRacingDeregistrationIsNeverWrong) {
  // Over two laps of the table's indices, so that entries are reused under
  // the lookups (a key byte differs from its index's previous one, so a key
  // could only match again if a lookup stalled for a whole lap).
  constexpr uint64_t kRounds = 150000;
  // lkey in the low 32 bits, round in the high ones: one atomic publication.
  std::atomic<uint64_t> current{0};
  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (uint64_t round = 1; round <= kRounds; ++round) {
      uint32_t lkey = 0, rkey = 0;
      // Every round's region has its own length and address: a mix of two
      // rounds' fields would be seen.
      ASSERT_EQ(table_.Add(1, IBV_ACCESS_LOCAL_WRITE, 0x1000, round, round << 20, &lkey, &rkey), 0);
      current.store(round << 32 | lkey, std::memory_order_release);
      ASSERT_EQ(table_.Remove(lkey), 0);
    }
    done.store(true);
  });
  uint64_t hits = 0, misses = 0;
  while (!done.load()) {
    const uint64_t c = current.load(std::memory_order_acquire);
    if (c == 0) continue;
    const uint64_t round = c >> 32;
    uint64_t host = 0;
    const int rc = table_.LookupLocal(static_cast<uint32_t>(c), 0x1000, round, 1,
                                      IBV_ACCESS_LOCAL_WRITE, &host);
    if (rc == 0) {
      ASSERT_EQ(host, round << 20) << "round " << round;
      ++hits;
    } else {
      ASSERT_EQ(rc, EINVAL);
      ++misses;
    }
  }
  churn.join();
  RecordProperty("hits", static_cast<int>(hits));
  RecordProperty("misses", static_cast<int>(misses));
}

}  // namespace
}  // namespace softrdma
