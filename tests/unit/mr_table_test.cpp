// MR key lookup and access checks of the per-process MR table.
#include "core/mr_table.h"

#include <cerrno>
#include <memory>
#include <set>
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

}  // namespace
}  // namespace softrdma
