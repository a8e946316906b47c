// Unit tests of ShmRegion, the RAII owner of POSIX shared-memory mappings.
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "shm_ring_test_util.h"

namespace softrdma::shm {
namespace {

using namespace softrdma::shm::ringtest;

TEST(ShmRegionTest, CreateOpenUnlink) {
  ShmNameGuard name{UniqueShmName("region")};
  ShmRegion a;
  ASSERT_TRUE(ShmRegion::Create(name.name, 12345, &a).ok());
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(a.size(), 12345u);
  struct stat sb;
  ASSERT_EQ(stat(("/dev/shm" + name.name).c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_EQ(sb.st_size, 12345);

  ShmRegion dup;
  Status st = ShmRegion::Create(name.name, 100, &dup);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_FALSE(dup.valid());

  ShmRegion b;
  ASSERT_TRUE(ShmRegion::Open(name.name, &b).ok());
  EXPECT_EQ(b.size(), 12345u);
  EXPECT_NE(a.data(), b.data());
  static_cast<char*>(a.data())[12344] = 'z';
  EXPECT_EQ(static_cast<char*>(b.data())[12344], 'z');  // the same memory

  ShmRegion moved = std::move(b);
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(static_cast<char*>(moved.data())[12344], 'z');

  ASSERT_TRUE(ShmRegion::Unlink(name.name).ok());
  EXPECT_EQ(ShmRegion::Unlink(name.name).code(), ENOENT);
  EXPECT_EQ(static_cast<char*>(moved.data())[12344], 'z');  // mappings survive unlink
  ShmRegion gone;
  EXPECT_EQ(ShmRegion::Open(name.name, &gone).code(), ENOENT);
}

TEST(ShmRegionTest, RejectsBadNames) {
  ShmRegion r;
  EXPECT_EQ(ShmRegion::Create("no-slash", 64, &r).code(), EINVAL);
  EXPECT_EQ(ShmRegion::Create("/a/b", 64, &r).code(), EINVAL);
  EXPECT_EQ(ShmRegion::Create("/", 64, &r).code(), EINVAL);
  EXPECT_EQ(ShmRegion::Open("", &r).code(), EINVAL);
  EXPECT_EQ(ShmRegion::Unlink("x").code(), EINVAL);
  ShmNameGuard name{UniqueShmName("zero")};
  EXPECT_EQ(ShmRegion::Create(name.name, 0, &r).code(), EINVAL);
  EXPECT_FALSE(r.valid());
}

}  // namespace
}  // namespace softrdma::shm
