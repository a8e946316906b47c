// Moving registered pages into shared memory (core/memory_export.h): the
// bytes stay, the pages become a memfd another process could map, extents
// are shared and released, and a forked child gets its own copy.
#include "core/memory_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "util/proc_maps.h"

namespace softrdma {
namespace {

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

// The mapping of ours that holds `addr`, or an empty entry.
MapsEntry MappingAt(const void* addr) {
  const auto a = reinterpret_cast<uint64_t>(addr);
  for (const MapsEntry& e : ReadSelfMaps())
    if (e.start <= a && a < e.end) return e;
  return {};
}

bool InOurMemfd(const void* addr) {
  MapsEntry e = MappingAt(addr);
  return e.shared && e.path.rfind("/memfd:softrdma-mr", 0) == 0;
}

class MemoryExportTest : public ::testing::Test {
 protected:
  MemoryExportTest() : table_(new ExtentTable()), exporter_(table_.get()) {
    mem_ = static_cast<uint8_t*>(
        mmap(nullptr, 8 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (uint64_t i = 0; i < 8 * kPage; ++i) mem_[i] = static_cast<uint8_t>(i * 13 + (i >> 12));
  }
  ~MemoryExportTest() override { munmap(mem_, 8 * kPage); }
  bool Intact() const {
    for (uint64_t i = 0; i < 8 * kPage; ++i)
      if (mem_[i] != static_cast<uint8_t>(i * 13 + (i >> 12))) return false;
    return true;
  }
  std::unique_ptr<ExtentTable> table_;
  MemoryExporter exporter_;
  uint8_t* mem_ = nullptr;
};

TEST_F(MemoryExportTest, WholePagesMoveAndKeepTheirBytes) {
  // [page 1 + 100, page 5 + 7): the whole pages are 2, 3 and 4.
  uint32_t slot = exporter_.Export(reinterpret_cast<uint64_t>(mem_ + kPage + 100), 4 * kPage - 93);
  ASSERT_NE(slot, 0u);
  const ExportedExtent& x = table_->slots[slot];
  EXPECT_NE(x.id.load(), 0u);
  EXPECT_EQ(x.base, reinterpret_cast<uint64_t>(mem_ + 2 * kPage));
  EXPECT_EQ(x.length, 3 * kPage);
  EXPECT_TRUE(Intact());
  EXPECT_FALSE(InOurMemfd(mem_ + kPage));  // partial pages stay private
  EXPECT_TRUE(InOurMemfd(mem_ + 2 * kPage));
  EXPECT_TRUE(InOurMemfd(mem_ + 4 * kPage));
  EXPECT_FALSE(InOurMemfd(mem_ + 5 * kPage));
  // The published descriptor is the memfd: another process opening
  // /proc/<pid>/fd/<fd> sees the same inode and the same bytes.
  struct stat st {};
  ASSERT_EQ(fstat(x.fd, &st), 0);
  EXPECT_EQ(st.st_ino, x.inode);
  std::string path = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(x.fd);
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* view = mmap(nullptr, x.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(view, MAP_FAILED);
  static_cast<uint8_t*>(view)[5] = 0xee;  // a peer's store...
  EXPECT_EQ(mem_[2 * kPage + 5], 0xee);   // ...is the application's memory
  munmap(view, x.length);
  exporter_.Release(slot);
  EXPECT_EQ(x.id.load(), 0u);
  EXPECT_EQ(table_->retired.load(), 1u);
  // Released: private memory again, with the same bytes.
  EXPECT_FALSE(InOurMemfd(mem_ + 2 * kPage));
  EXPECT_FALSE(MappingAt(mem_ + 2 * kPage).shared);
  EXPECT_EQ(mem_[2 * kPage + 5], 0xee);
  mem_[2 * kPage + 5] = static_cast<uint8_t>((2 * kPage + 5) * 13 + ((2 * kPage + 5) >> 12));
  EXPECT_TRUE(Intact());
}

TEST_F(MemoryExportTest, NothingToMoveBelowAPage) {
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_ + 10), kPage), 0u);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_ + 10), 100), 0u);
  EXPECT_FALSE(InOurMemfd(mem_));
  EXPECT_TRUE(Intact());
}

TEST_F(MemoryExportTest, ContainedRegionsShareAnExtentStraddlingOnesDoNot) {
  uint32_t a = exporter_.Export(reinterpret_cast<uint64_t>(mem_), 4 * kPage);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_ + kPage), 2 * kPage), a);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_), 4 * kPage), a);
  EXPECT_EQ(table_->slots[a].refs, 3u);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_ + 3 * kPage), 2 * kPage), 0u);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mem_ + 5 * kPage), 2 * kPage), a + 1);
  exporter_.Release(a);
  exporter_.Release(a);
  EXPECT_NE(table_->slots[a].id.load(), 0u);  // one user left
  exporter_.Release(a);
  EXPECT_EQ(table_->slots[a].id.load(), 0u);
  EXPECT_FALSE(InOurMemfd(mem_));  // private again
  EXPECT_TRUE(InOurMemfd(mem_ + 5 * kPage));
  // Released pages can be moved again (a fresh extent).
  uint32_t again = exporter_.Export(reinterpret_cast<uint64_t>(mem_), 4 * kPage);
  EXPECT_NE(again, 0u);
  EXPECT_TRUE(Intact());
  exporter_.Release(again);
  exporter_.Release(a + 1);
  EXPECT_FALSE(InOurMemfd(mem_ + 5 * kPage));
  EXPECT_TRUE(Intact());
}

TEST_F(MemoryExportTest, ReleaseAfterTheApplicationUnmappedPartOfTheRegion) {
  uint32_t slot = exporter_.Export(reinterpret_cast<uint64_t>(mem_), 6 * kPage);
  ASSERT_NE(slot, 0u);
  ASSERT_EQ(munmap(mem_ + 4 * kPage, 2 * kPage), 0);
  exporter_.Release(slot);  // restores what is left, maps nothing new
  EXPECT_FALSE(InOurMemfd(mem_));
  EXPECT_FALSE(MappingAt(mem_ + 4 * kPage).shared);
  for (uint64_t i = 0; i < 4 * kPage; ++i)
    ASSERT_EQ(mem_[i], static_cast<uint8_t>(i * 13 + (i >> 12))) << i;
  void* again = mmap(mem_ + 4 * kPage, 2 * kPage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(again, static_cast<void*>(mem_ + 4 * kPage)) << "the unmapped part stayed unmapped";
}

TEST_F(MemoryExportTest, FileAndSharedMappingsStayWhereTheyAre) {
  void* shared =
      mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(shared), 4 * kPage), 0u);
  munmap(shared, 4 * kPage);
  void* readonly = mmap(nullptr, 4 * kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(readonly, MAP_FAILED);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(readonly), 4 * kPage), 0u);
  munmap(readonly, 4 * kPage);
  // Part private, part not: nothing moves.
  void* mixed =
      mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mixed, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<uint8_t*>(mixed) + 3 * kPage, kPage, PROT_READ), 0);
  EXPECT_EQ(exporter_.Export(reinterpret_cast<uint64_t>(mixed), 4 * kPage), 0u);
  EXPECT_FALSE(InOurMemfd(mixed));
  munmap(mixed, 4 * kPage);
}

TEST_F(MemoryExportTest, ForkedChildGetsAPrivateCopy) {
  uint32_t slot = exporter_.Export(reinterpret_cast<uint64_t>(mem_), 8 * kPage);
  ASSERT_NE(slot, 0u);
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    MemoryExporter::PrivatizeAfterFork();
    exporter_.ForgetAfterFork();
    int code = 0;
    if (InOurMemfd(mem_)) code = 1;  // still shared with the parent
    if (!Intact()) code = 2;         // the copy lost bytes
    mem_[0] = 0x77;                  // must not reach the parent
    char c = 'r';
    if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) code = 3;
    if (mem_[kPage] != static_cast<uint8_t>(kPage * 13 + 1)) code = 4;  // saw the parent's store
    _exit(code);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  mem_[kPage] = 0x55;  // after the child copied: must not reach the child
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(mem_[0], static_cast<uint8_t>(0));  // the child's store stayed in the child
  EXPECT_TRUE(InOurMemfd(mem_));
  exporter_.Release(slot);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
}

}  // namespace
}  // namespace softrdma
