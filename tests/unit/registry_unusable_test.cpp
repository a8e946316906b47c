// A registry that cannot be used (damaged header or tables, of another
// layout version, left half-made, another user's) is refused with EPROTO / EACCES and a message
// that names the file, the reason and the fix; removing it is enough to
// start again.
#include "host/registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "host/unusable_shm.h"
#include "wire/shm/shm_region.h"

namespace softrdma {
namespace {

class RegistryUnusable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The same namespace as registry_test.cpp: the config is read once per
    // process, whichever test comes first.
    setenv("SOFTRDMA_NAMESPACE", ("ut" + std::to_string(getpid())).c_str(), 1);
  }
  void SetUp() override {
    name_ = Registry::RegistryName();
    path_ = ShmPath(name_);
    shm::ShmRegion::Unlink(name_);
    Registry made;  // a good one, to damage
    ASSERT_TRUE(Registry::Open(&made).ok());
  }
  void TearDown() override { shm::ShmRegion::Unlink(name_); }

  // Writes `bytes` at `offset` of the registry file.
  void Poke(off_t offset, const void* bytes, size_t len) {
    int fd = open(path_.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, bytes, len, offset), static_cast<ssize_t>(len));
    close(fd);
  }
  // Opening fails with `code`; the message names the file, `reason` and `fix`.
  void ExpectRefused(int code, const std::string& reason,
                     const std::string& fix = kRemoveItOrSetNamespace) {
    Registry reg;
    Status s = Registry::Open(&reg);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_EQ(s.message().rfind(path_ + ": ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(fix), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
    // The fix works: without the file a new registry is made.
    shm::ShmRegion::Unlink(name_);
    Registry fresh;
    EXPECT_TRUE(Registry::Open(&fresh).ok());
  }

  std::string name_, path_;
};

TEST_F(RegistryUnusable, GoodOneOpens) {
  Registry reg;
  EXPECT_TRUE(Registry::Open(&reg).ok());
}

TEST_F(RegistryUnusable, AnotherLayoutVersion) {
  const uint32_t version = 999;
  Poke(8, &version, sizeof version);
  ExpectRefused(EPROTO,
                "was made by another softrdma version (registry layout 999, this library uses ");
}

TEST_F(RegistryUnusable, DamagedHeader) {
  const char garbage[8] = {'n', 'o', 't', ' ', 'o', 'u', 'r', 's'};
  Poke(0, garbage, sizeof garbage);
  ExpectRefused(EPROTO, "is damaged (not a softrdma registry header)");
}

TEST_F(RegistryUnusable, Truncated) {
  ASSERT_EQ(truncate(path_.c_str(), 4096), 0);
  ExpectRefused(EPROTO, "is damaged (4096 bytes, layout ");
}

TEST_F(RegistryUnusable, EmptyFile) {
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  ExpectRefused(EPROTO, "is empty or truncated (0 bytes)");
}

TEST_F(RegistryUnusable, NoHeader) {
  const uint64_t zero = 0;
  Poke(0, &zero, sizeof zero);  // the magic: its creator died before writing it
  ExpectRefused(EPROTO, "has no header: damaged, or its creator died while making it");
}

TEST_F(RegistryUnusable, LeftHalfMade) {
  const uint32_t not_ready = 0;
  Poke(24, &not_ready, sizeof not_ready);  // `ready`, set last by its creator
  ExpectRefused(EPROTO, "was left half-made");
}

TEST_F(RegistryUnusable, AnotherUsersRegistry) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  ASSERT_EQ(chown(path_.c_str(), 4242, 4242), 0);
  ExpectRefused(EACCES, "belongs to uid 4242, not to this user (uid 0)");
}

// A good header over damaged tables. Offsets of layout 3 (registry.cpp's
// Layout): a 28-byte header padded to 32, 1024 process slots of 16 bytes,
// 131072 QPN owner words, 131072 published QP entries of 32 bytes, then
// the atomic lock words.
constexpr off_t kProcsOffset = 32;
constexpr off_t kQpnOwnerOffset = kProcsOffset + 1024 * 16;
constexpr off_t kAtomicLocksOffset = kQpnOwnerOffset + 131072 * 8 + 131072 * 32;

TEST_F(RegistryUnusable, HeaderCountsOfAnotherLayout) {
  const uint32_t max_procs = 7;
  Poke(12, &max_procs, sizeof max_procs);
  ExpectRefused(EPROTO, "is damaged (its header says 7 process slots and 131072 QPNs");
}

TEST_F(RegistryUnusable, ProcessSlotWithAnImpossiblePid) {
  const uint64_t owner = 0x00000005ffffffffull;  // generation 5, pid -1
  Poke(kProcsOffset + 3 * 16, &owner, sizeof owner);
  ExpectRefused(EPROTO, "is damaged (process slot 3 names pid -1)");
}

TEST_F(RegistryUnusable, QpnNamingAProcessSlotBeyondTheTable) {
  const uint64_t owner = 0x0000000100001389ull;  // slot + 1 = 5001
  Poke(kQpnOwnerOffset + 100 * 8, &owner, sizeof owner);
  ExpectRefused(EPROTO, "is damaged (QPN 100 names process slot 5000)");
}

TEST_F(RegistryUnusable, AtomicLockHeldByAnImpossiblePid) {
  // Left in place, every atomic on this stripe would wait forever: no
  // process can ever release it, and none can be found dead.
  const uint32_t holder = 0x80000000u;
  Poke(kAtomicLocksOffset + 17 * 4, &holder, sizeof holder);
  ExpectRefused(EPROTO, "is damaged (atomic lock 17 is held by pid -2147483648)");
}

}  // namespace
}  // namespace softrdma
