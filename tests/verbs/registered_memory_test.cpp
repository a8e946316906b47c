// Registered memory as peers reach it: ibv_reg_mr moves a region's whole
// pages into shared memory (unless SOFTRDMA_MAP_MR=0) without changing a
// byte, a forked child gets its own copy (as with real hardware), and a peer
// process follows registrations coming and going: it maps the new memory,
// drops the old, and a stale rkey opens nothing.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mremap_hook.h"
#include "process_pipes.h"
#include "two_process_conn.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

bool MappingDisabled() {
  const char* v = getenv("SOFTRDMA_MAP_MR");
  return v && strcmp(v, "0") == 0;
}

// What /proc/self/maps says of the mapping holding `addr`.
struct Mapping {
  bool found = false;
  bool shared = false;
  unsigned long inode = 0;
  std::string path;
};

Mapping MappingAt(const void* addr) {
  const auto a = reinterpret_cast<unsigned long>(addr);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0, inode = 0;
    char perms[8] = {}, dev[16] = {}, path[512] = {};
    unsigned long long offset = 0;
    if (sscanf(line.c_str(), "%lx-%lx %7s %llx %15s %lu %511[^\n]", &start, &end, perms, &offset,
               dev, &inode, path) < 6)
      continue;
    if (a < start || a >= end) continue;
    return {true, perms[3] == 's', inode, path};
  }
  return {};
}

bool MovedToSharedMemory(const void* addr) {
  Mapping m = MappingAt(addr);
  return m.shared && m.path.rfind("/memfd:softrdma-mr", 0) == 0;
}

// True if this process maps the file with `inode` anywhere.
bool MapsInode(unsigned long inode) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev;
    unsigned long ino = 0;
    if ((in >> range >> perms >> offset >> dev >> ino) && ino == inode) return true;
  }
  return false;
}

uint8_t Pattern(size_t i) {
  return static_cast<uint8_t>(i * 29 + (i >> 10));
}

class RegisteredMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = OpenSoftrdma();
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    mem_ = static_cast<uint8_t*>(
        mmap(nullptr, 6 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem_, MAP_FAILED);
    for (size_t i = 0; i < 6 * kPage; ++i) mem_[i] = Pattern(i);
  }
  void TearDown() override {
    if (mem_ && mem_ != MAP_FAILED) munmap(mem_, 6 * kPage);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }
  bool Intact() const {
    for (size_t i = 0; i < 6 * kPage; ++i)
      if (mem_[i] != Pattern(i)) return false;
    return true;
  }
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t* mem_ = nullptr;
};

TEST_F(RegisteredMemory, RegistrationKeepsEveryByteAndMovesWholePages) {
  // From the middle of page 0 to the middle of page 5: pages 1-4 are whole.
  ibv_mr* mr = ibv_reg_mr(pd_, mem_ + 123, 5 * kPage, kAllRemote);
  ASSERT_NE(mr, nullptr);
  EXPECT_TRUE(Intact());
  EXPECT_FALSE(MovedToSharedMemory(mem_));
  EXPECT_EQ(MovedToSharedMemory(mem_ + kPage), !MappingDisabled());
  EXPECT_EQ(MovedToSharedMemory(mem_ + 4 * kPage), !MappingDisabled());
  EXPECT_FALSE(MovedToSharedMemory(mem_ + 5 * kPage));
  mem_[2 * kPage] = 0x42;  // the application's memory as before
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(mem_[2 * kPage], 0x42);
  mem_[2 * kPage] = Pattern(2 * kPage);
  EXPECT_TRUE(Intact());
}

// UCX's memory hooks interpose mremap in libibverbs too and forward only
// four arguments: ibv_reg_mr's page move (mremap with MREMAP_FIXED) lost
// its target, so registered memory either stayed private (peers' writes
// then never reached what the owner reads: ucx_perftest put_lat hung) or
// moved elsewhere. The moves must not go through the interposable symbol.
TEST_F(RegisteredMemory, PageMovesBypassAnInterposedMremap) {
  ArmFourArgumentMremapHook(true);
  ibv_mr* mr = ibv_reg_mr(pd_, mem_, 6 * kPage, kAllRemote);
  const bool moved = mr && MovedToSharedMemory(mem_ + 2 * kPage);
  const bool intact = Intact();
  const bool deregistered = mr && ibv_dereg_mr(mr) == 0;
  const bool private_again = !MovedToSharedMemory(mem_ + 2 * kPage);
  const uint32_t hook_calls = FourArgumentMremapHookCalls();
  ArmFourArgumentMremapHook(false);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(moved, !MappingDisabled());
  EXPECT_TRUE(intact);
  EXPECT_TRUE(deregistered);
  EXPECT_TRUE(private_again);
  EXPECT_TRUE(Intact());
  EXPECT_EQ(hook_calls, 0u) << "libibverbs called the interposed mremap";
}

TEST_F(RegisteredMemory, MemoryThatCannotMoveStillRegisters) {
  void* shared =
      mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  memset(shared, 0x3c, 4 * kPage);
  ibv_mr* mr = ibv_reg_mr(pd_, shared, 4 * kPage, kAllRemote);
  ASSERT_NE(mr, nullptr);
  EXPECT_FALSE(MovedToSharedMemory(shared));
  EXPECT_EQ(static_cast<uint8_t*>(shared)[4 * kPage - 1], 0x3c);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(shared, 4 * kPage);
}

TEST_F(RegisteredMemory, ForkedChildGetsItsOwnCopy) {
  ibv_mr* mr = ibv_reg_mr(pd_, mem_, 6 * kPage, kAllRemote);
  ASSERT_NE(mr, nullptr);
  Child child = ForkChild([&](int up, int down) {
    int code = 0;
    if (MovedToSharedMemory(mem_)) code = 1;  // still shared with the parent
    if (!Intact()) code = 2;
    mem_[0] = static_cast<uint8_t>(~Pattern(0));  // must stay in the child
    char c = 'r';
    if (!WriteAll(up, &c, 1) || !ReadAll(down, &c, 1)) code = 3;
    if (mem_[kPage] != Pattern(kPage)) code = 4;  // the parent's later store leaked in
    _exit(code);
  });
  ASSERT_GT(child.pid, 0);
  char c;
  ASSERT_TRUE(ReadAll(child.from_child, &c, 1));
  mem_[kPage] = static_cast<uint8_t>(~Pattern(kPage));
  ASSERT_TRUE(WriteAll(child.to_child, "g", 1));
  int st = 0;
  ASSERT_EQ(waitpid(child.pid, &st, 0), child.pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(mem_[0], Pattern(0));
  EXPECT_EQ(MovedToSharedMemory(mem_), !MappingDisabled());
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  mem_[kPage] = Pattern(kPage);
  EXPECT_TRUE(Intact());
  close(child.from_child);
  close(child.to_child);
}

// Heap buffers registered, deregistered and freed while other allocations
// sit between them, then a fork: malloc's own data ends up in the pages that
// were registered, so they must be private memory again (shared pages would
// let the child's allocations corrupt the parent's heap).
void ChurnHeap() {
  std::vector<void*> held;
  for (int i = 0; i < 20000; ++i) {
    void* p = malloc(64 + static_cast<size_t>(i % 5000));
    ASSERT_NE(p, nullptr);
    memset(p, 0x11, 64);
    if (i % 3)
      free(p);
    else
      held.push_back(p);
  }
  for (void* p : held) free(p);
}

TEST_F(RegisteredMemory, HeapReusedAfterDeregistrationStaysPrivate) {
  std::vector<void*> spacers;
  for (int i = 0; i < 40; ++i) {
    const size_t size = kPage * (1 + i % 7) + 100;
    auto* b = static_cast<uint8_t*>(malloc(size));
    ASSERT_NE(b, nullptr);
    memset(b, i, size);
    ibv_mr* mr = ibv_reg_mr(pd_, b, size, kAllRemote);
    ASSERT_NE(mr, nullptr);
    spacers.push_back(malloc(1000));  // keeps the freed buffers from merging
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_FALSE(MovedToSharedMemory(b + kPage)) << "deregistered pages are private again";
    for (size_t k = 0; k < size; ++k) ASSERT_EQ(b[k], static_cast<uint8_t>(i)) << k;
    free(b);
  }
  Child child = ForkChild([](int up, int) {
    ChurnHeap();
    char ok = 'y';
    WriteAll(up, &ok, 1);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
  ASSERT_GT(child.pid, 0);
  char ok = 0;
  EXPECT_TRUE(ReadAll(child.from_child, &ok, 1));
  ChurnHeap();
  int st = 0;
  ASSERT_EQ(waitpid(child.pid, &st, 0), child.pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  for (void* p : spacers) free(p);
  close(child.from_child);
  close(child.to_child);
}

// ------------------------------------------------------------------------
// A peer process follows the target's registrations: two MRs on one buffer
// share its pages, the second keeps working after the first goes, a new
// registration of new memory is mapped afresh while the old mapping is
// dropped, and the first rkey opens nothing any more.

struct TargetInfo {
  Remote r[3];
  unsigned long inode;  // of the target's moved pages (0 when not moved)
};

enum Step : char { kCheckA = 'a', kDropFirst = 'd', kCheckB = 'b', kRenew = 'n', kCheckC = 'c' };

[[noreturn]] void ReregTarget(int up, int down) {
  ChildSide side(30);
  auto& [ctx, gid, pd, c] = side;
  const size_t len = 4 * kPage;
  auto* buf = static_cast<uint8_t*>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (buf == MAP_FAILED) _exit(12);
  ibv_mr* m1 = ibv_reg_mr(pd, buf, len, kAllRemote);
  ibv_mr* m2 = ibv_reg_mr(pd, buf + kPage, kPage, kAllRemote);
  if (!m1 || !m2) _exit(13);
  const auto at = [](const void* p) { return reinterpret_cast<uint64_t>(p); };
  TargetInfo info{{{at(buf), m1->rkey, c.qp->qp_num}, {at(buf + kPage), m2->rkey, c.qp->qp_num}},
                  MovedToSharedMemory(buf) ? MappingAt(buf).inode : 0};
  uint32_t peer_qpn = 0;
  if (!WriteAll(up, &info, sizeof info) || !ReadAll(down, &peer_qpn, 4)) _exit(14);
  if (!c.Connect(ctx, gid, peer_qpn) || !WriteAll(up, "r", 1)) _exit(15);
  uint8_t* fresh = nullptr;
  ibv_mr* m3 = nullptr;
  for (;;) {
    char step;
    if (!ReadAll(down, &step, 1)) break;  // the parent is done
    bool ok = true;
    switch (step) {
      case kCheckA:
        ok = memcmp(buf + 8, "AAAAAAAA", 8) == 0;
        break;
      case kDropFirst:
        ok = ibv_dereg_mr(m1) == 0;
        m1 = nullptr;
        break;
      case kCheckB:
        ok = memcmp(buf + kPage + 16, "BBBBBBBB", 8) == 0;
        break;
      case kRenew: {
        ok = ibv_dereg_mr(m2) == 0 && munmap(buf, len) == 0;
        m2 = nullptr;
        buf = nullptr;
        fresh = static_cast<uint8_t*>(
            mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        ok = ok && fresh != MAP_FAILED;
        if (!ok) break;
        memset(fresh, 'D', len);
        m3 = ibv_reg_mr(pd, fresh, len, kAllRemote);
        ok = m3 != nullptr;
        if (!ok) break;
        info.r[2] = {at(fresh), m3->rkey, c.qp->qp_num};
        info.inode = MovedToSharedMemory(fresh) ? MappingAt(fresh).inode : 0;
        ok = WriteAll(up, &info, sizeof info);
        break;
      }
      case kCheckC:
        ok = memcmp(fresh + 3 * kPage, "CCCCCCCC", 8) == 0;
        break;
      default:
        ok = false;
    }
    if (!WriteAll(up, ok ? "y" : "n", 1)) break;
  }
  bool released = true;
  for (ibv_mr* m : {m1, m2, m3})
    if (m) released = ibv_dereg_mr(m) == 0 && released;
  for (uint8_t* p : {buf, fresh})
    if (p && p != MAP_FAILED) munmap(p, len);
  exit(side.Release() && released ? 0 : 16);
}

TEST(RegisteredMemoryTwoProcesses, PeerFollowsRegistrations) {
  // Fork before this process creates its first QP (which starts its progress
  // thread): see ForkBeforeThreads in two_process_conn.h.
  Child child = ForkChild(ReregTarget);
  ASSERT_GT(child.pid, 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Conn c;
  ASSERT_TRUE(c.Create(ctx, pd));
  TargetInfo info{};
  ASSERT_TRUE(ReadAll(child.from_child, &info, sizeof info));
  EXPECT_EQ(info.inode != 0, !MappingDisabled()) << "target pages moved";
  ASSERT_TRUE(c.Connect(ctx, gid, info.r[0].qpn));
  ASSERT_TRUE(WriteAll(child.to_child, &c.qp->qp_num, 4));
  char answer;
  ASSERT_TRUE(ReadAll(child.from_child, &answer, 1));
  auto step = [&](Step s) {
    char a = 0;
    return WriteAll(child.to_child, &s, 1) && ReadAll(child.from_child, &a, 1) && a == 'y';
  };
  // Local buffer below a page: it stays private, so every softrdma memfd
  // this process maps is the target's.
  alignas(64) static char local[64];
  ibv_mr* ml = ibv_reg_mr(pd, local, sizeof local, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(ml, nullptr);
  auto run = [&](ibv_wr_opcode op, const char* text, const Remote& r, uint64_t offset) {
    memcpy(local, text, 8);
    ibv_sge s{reinterpret_cast<uintptr_t>(local), 8, ml->lkey};
    return RunOne(c, op, &s, 1, r.addr + offset, r.rkey);
  };
  const bool mapped = !MappingDisabled() && !CmaDisabled();

  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, "AAAAAAAA", info.r[0], 8), IBV_WC_SUCCESS);
  EXPECT_TRUE(step(kCheckA));
  if (mapped) {
    EXPECT_TRUE(MapsInode(info.inode)) << "the WRITE went through a mapping";
  }
  EXPECT_TRUE(step(kDropFirst));
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, "BBBBBBBB", info.r[1], 16), IBV_WC_SUCCESS);
  EXPECT_TRUE(step(kCheckB));
  const unsigned long old_inode = info.inode;
  ASSERT_TRUE(WriteAll(child.to_child, "n", 1));
  ASSERT_TRUE(ReadAll(child.from_child, &info, sizeof info));
  ASSERT_TRUE(ReadAll(child.from_child, &answer, 1));
  ASSERT_EQ(answer, 'y');
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, "CCCCCCCC", info.r[2], 3 * kPage), IBV_WC_SUCCESS);
  EXPECT_TRUE(step(kCheckC));
  EXPECT_EQ(run(IBV_WR_RDMA_READ, "xxxxxxxx", info.r[2], 5), IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(local, "DDDDDDDD", 8), 0);
  if (mapped) {
    EXPECT_TRUE(MapsInode(info.inode)) << "the new registration is mapped";
    EXPECT_FALSE(MapsInode(old_inode)) << "the released one is not any more";
  }
  // The first registration is gone: its rkey opens nothing.
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, "EEEEEEEE", info.r[0], 0), IBV_WC_REM_ACCESS_ERR);

  close(child.to_child);  // the target exits
  int st = WaitChildPolling(child.pid, c.cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  close(child.from_child);
  ibv_dereg_mr(ml);
  ibv_destroy_qp(c.qp);
  ibv_destroy_cq(c.cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softrdma::test
