// GidLookupCache (core/device.h): the Device's GID answers for a UD QP's
// sends, looked up again only when the GID table changes.
#include <gtest/gtest.h>

#include <cstring>

#include "core/device.h"
#include "core/limits.h"
#include "mapped_ipv4_gid.h"

namespace softrdma {
namespace {

using softrdma::testing::MappedIpv4;

// The table always holds 127.0.0.1 (Device::RefreshGids); 192.0.2.1 is a
// documentation address no host has.
const ibv_gid kLoopback = MappedIpv4(127, 0, 0, 1);
const ibv_gid kElsewhere = MappedIpv4(192, 0, 2, 1);

TEST(GidLookupCache, AnswersAsTheDeviceDoes) {
  const Device& device = Device::Get();
  GidLookupCache cache;
  for (int index = -1; index <= limits::kGidTableLen; ++index) {
    GidEntry want;
    GidEntry got;
    const bool found = device.GidAt(index, &want);
    ASSERT_EQ(cache.At(index, &got), found) << "index " << index;
    if (found) {
      EXPECT_EQ(memcmp(got.gid.raw, want.gid.raw, sizeof got.gid.raw), 0);
    }
  }
  EXPECT_TRUE(device.IsLocalGid(kLoopback));
  EXPECT_TRUE(cache.IsLocal(kLoopback));
  EXPECT_FALSE(device.IsLocalGid(kElsewhere));
  EXPECT_FALSE(cache.IsLocal(kElsewhere));
  EXPECT_TRUE(cache.IsLocal(kLoopback));  // a different GID is looked up, not taken from before
}

TEST(GidLookupCache, AskedTheSameAgainItDoesNotGoToTheDevice) {
  GidLookupCache cache;
  GidEntry entry;
  cache.At(0, &entry);
  cache.IsLocal(kLoopback);
  const uint64_t refills = cache.refills();
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(cache.At(0, &entry));
    EXPECT_TRUE(cache.IsLocal(kLoopback));
  }
  EXPECT_EQ(cache.refills(), refills);
}

TEST(GidLookupCache, LooksUpAgainAfterTheTableIsRefreshed) {
  Device& device = Device::Get();
  GidLookupCache cache;
  GidEntry entry;
  cache.At(0, &entry);
  cache.IsLocal(kLoopback);
  const uint64_t refills = cache.refills();
  const uint64_t generation = device.gid_generation();
  device.RefreshGids();
  EXPECT_GT(device.gid_generation(), generation);
  EXPECT_TRUE(cache.At(0, &entry));
  EXPECT_TRUE(cache.IsLocal(kLoopback));
  EXPECT_EQ(cache.refills(), refills + 2);
}

}  // namespace
}  // namespace softrdma
