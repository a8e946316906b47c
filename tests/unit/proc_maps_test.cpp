// Parsing /proc/self/maps (util/proc_maps.h).
#include "util/proc_maps.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace softrdma {
namespace {

TEST(ProcMaps, ParsesEveryField) {
  const char* text =
      "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f1c2c000000-7f1c2c100000 rw-s 00000000 00:01 123456                     /memfd:softrdma-mr "
      "(deleted)\n"
      "7f1c2d000000-7f1c2d001000 r-xp 0001a000 fd:01 9876                       /usr/lib/x.so\n"
      "7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 \n"
      "garbage line\n"
      "7f00-7e00 rw-p 00000000 00:00 0\n";  // end before start: skipped
  auto maps = ParseMaps(text);
  ASSERT_EQ(maps.size(), 4u);
  EXPECT_EQ(maps[0].start, 0x55d0c0a00000u);
  EXPECT_EQ(maps[0].end, 0x55d0c0a21000u);
  EXPECT_TRUE(maps[0].read && maps[0].write && !maps[0].exec && !maps[0].shared);
  EXPECT_EQ(maps[0].path, "[heap]");
  EXPECT_TRUE(maps[1].shared);
  EXPECT_EQ(maps[1].inode, 123456u);
  EXPECT_EQ(maps[1].path, "/memfd:softrdma-mr (deleted)");
  EXPECT_TRUE(maps[2].exec && !maps[2].write);
  EXPECT_EQ(maps[2].offset, 0x1a000u);
  EXPECT_EQ(maps[2].path, "/usr/lib/x.so");
  EXPECT_EQ(maps[3].path, "");  // anonymous (trailing blank only)
}

TEST(ProcMaps, SelfMapsShowsAFreshAnonymousMapping) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, 3 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto start = reinterpret_cast<uint64_t>(p);
  bool found = false;
  for (const MapsEntry& e : ReadSelfMaps()) {
    if (e.start <= start && start < e.end) {
      found = true;
      EXPECT_TRUE(e.read);
      EXPECT_FALSE(e.write);
      EXPECT_FALSE(e.shared);
      EXPECT_EQ(e.inode, 0u);
    }
  }
  EXPECT_TRUE(found);
  munmap(p, 3 * page);
}

}  // namespace
}  // namespace softrdma
