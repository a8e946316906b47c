// One-sided operations between processes: a WRITE/READ that needs no CPU of
// the target (it is SIGSTOPped), atomics hammered from several processes
// and threads, and deregistration while a peer keeps reading.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "process_pipes.h"
#include "two_process_conn.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

// ------------------------------------------------------------------------
// A 1 MiB WRITE and READ while the target process is stopped: the data can
// only have moved by the initiator's own single copy, never through the
// target's ring (which nobody drains while it is stopped).

constexpr size_t kMeg = (1 << 20) + 7;

[[noreturn]] void TargetChild(int up, int down) {
  ChildSide side(30);
  auto& [ctx, gid, pd, c] = side;
  std::vector<uint8_t> wbuf(kMeg + 16, 0), rbuf(kMeg);
  for (size_t i = 0; i < rbuf.size(); ++i) rbuf[i] = static_cast<uint8_t>(i * 31 + (i >> 9));
  ibv_mr* mw = ibv_reg_mr(pd, wbuf.data(), wbuf.size(), kAllRemote);
  ibv_mr* mr = ibv_reg_mr(pd, rbuf.data(), rbuf.size(), kAllRemote);
  if (!mw || !mr) _exit(12);
  Remote mine[2] = {{reinterpret_cast<uintptr_t>(&wbuf[3]), mw->rkey, c.qp->qp_num},
                    {reinterpret_cast<uintptr_t>(rbuf.data()), mr->rkey, c.qp->qp_num}};
  uint64_t rsum = Checksum(rbuf.data(), rbuf.size());
  uint32_t peer_qpn = 0;
  if (!WriteAll(up, mine, sizeof mine) || !WriteAll(up, &rsum, 8) || !ReadAll(down, &peer_qpn, 4))
    _exit(13);
  if (!c.Connect(ctx, gid, peer_qpn)) _exit(14);
  char ready = 'r';
  if (!WriteAll(up, &ready, 1)) _exit(15);
  uint64_t expect = 0;
  if (!ReadAll(down, &expect, 8)) _exit(16);  // (we may be stopped meanwhile)
  if (Checksum(&wbuf[3], kMeg) != expect) _exit(17);
  if (wbuf[2] != 0 || wbuf[3 + kMeg] != 0) _exit(18);
  if (ibv_dereg_mr(mw) || ibv_dereg_mr(mr) || !side.Release()) _exit(19);
  exit(0);  // exit(): the library removes its segment at exit
}

TEST(OneSidedTwoProcesses, MegabyteWriteAndReadWithoutTargetCpu) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) TargetChild(up[1], down[0]);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Conn c;
  ASSERT_TRUE(c.Create(ctx, pd));
  Remote target[2];
  uint64_t rsum = 0;
  ASSERT_TRUE(ReadAll(up[0], target, sizeof target));
  ASSERT_TRUE(ReadAll(up[0], &rsum, 8));
  ASSERT_TRUE(c.Connect(ctx, gid, target[0].qpn));
  ASSERT_TRUE(WriteAll(down[1], &c.qp->qp_num, 4));
  char ready;
  ASSERT_TRUE(ReadAll(up[0], &ready, 1));

  std::vector<uint8_t> src(kMeg), back(kMeg + 2, 0xaa);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + (i >> 11));
  ibv_mr* ms = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* mb = ibv_reg_mr(pd, back.data(), back.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(ms && mb);

  const bool stop = !CmaDisabled();
  if (stop) {
    ASSERT_EQ(kill(child, SIGSTOP), 0);
    int st = 0;
    ASSERT_EQ(waitpid(child, &st, WUNTRACED), child);
    ASSERT_TRUE(WIFSTOPPED(st));
  }
  ibv_sge w[2] = {
      {reinterpret_cast<uintptr_t>(src.data()), 4099, ms->lkey},
      {reinterpret_cast<uintptr_t>(&src[4099]), static_cast<uint32_t>(kMeg - 4099), ms->lkey}};
  EXPECT_EQ(RunOne(c, IBV_WR_RDMA_WRITE, w, 2, target[0].addr, target[0].rkey), IBV_WC_SUCCESS);
  ibv_sge r[2] = {
      {reinterpret_cast<uintptr_t>(&back[1]), 1000, mb->lkey},
      {reinterpret_cast<uintptr_t>(&back[1001]), static_cast<uint32_t>(kMeg - 1000), mb->lkey}};
  EXPECT_EQ(RunOne(c, IBV_WR_RDMA_READ, r, 2, target[1].addr, target[1].rkey), IBV_WC_SUCCESS);
  if (stop) {
    ASSERT_EQ(kill(child, SIGCONT), 0);
  }
  EXPECT_EQ(Checksum(&back[1], kMeg), rsum);
  EXPECT_EQ(back[0], 0xaa);
  EXPECT_EQ(back[kMeg + 1], 0xaa);
  uint64_t sum = Checksum(src.data(), kMeg);
  ASSERT_TRUE(WriteAll(down[1], &sum, 8));
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  ibv_dereg_mr(ms);
  ibv_dereg_mr(mb);
  ibv_destroy_qp(c.qp);
  ibv_destroy_cq(c.cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

// ------------------------------------------------------------------------
// Atomics hammered on one counter of the parent from 2 child processes x 2
// threads and from a parent thread (its own loopback QP), mixing
// FETCH_AND_ADD with compare-and-swap increment loops: the final value must
// be the exact number of increments.

constexpr int kChildren = 2;
constexpr int kThreads = 2;
constexpr int kOpsPerThread = 1500;

// kOpsPerThread increments; every 4th one by a CAS loop.
bool Hammer(Conn& c, uint64_t addr, uint32_t rkey, uint64_t* result, uint32_t lkey) {
  ibv_sge s{reinterpret_cast<uintptr_t>(result), 8, lkey};
  uint64_t guess = 0;
  for (int i = 0; i < kOpsPerThread; ++i) {
    if (i % 4 == 3) {
      for (int tries = 0;; ++tries) {
        if (tries > 100000) return false;
        if (RunOne(c, IBV_WR_ATOMIC_CMP_AND_SWP, &s, 1, addr, rkey, guess, guess + 1) !=
            IBV_WC_SUCCESS)
          return false;
        if (*result == guess) break;
        guess = *result;
      }
      ++guess;
    } else {
      if (RunOne(c, IBV_WR_ATOMIC_FETCH_AND_ADD, &s, 1, addr, rkey, 1) != IBV_WC_SUCCESS)
        return false;
      guess = *result + 1;
    }
  }
  return true;
}

[[noreturn]] void HammerChild(int up, int down) {
  alarm(60);
  ibv_context* ctx = OpenSoftrdma();
  if (!ctx) _exit(10);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Conn c[kThreads];
  for (auto& x : c)
    if (!x.Create(ctx, pd)) _exit(11);
  Remote counter[kThreads];
  if (!ReadAll(down, counter, sizeof counter)) _exit(12);
  for (int t = 0; t < kThreads; ++t) {
    if (!c[t].Connect(ctx, gid, counter[t].qpn)) _exit(13);
    if (!WriteAll(up, &c[t].qp->qp_num, 4)) _exit(14);
  }
  char go;
  if (!ReadAll(down, &go, 1)) _exit(15);
  alignas(8) static uint64_t results[kThreads];
  ibv_mr* mr = ibv_reg_mr(pd, results, sizeof results, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) _exit(16);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      if (!Hammer(c[t], counter[t].addr, counter[t].rkey, &results[t], mr->lkey)) ++failures;
    });
  for (auto& th : threads) th.join();
  bool released = ibv_dereg_mr(mr) == 0;
  for (auto& x : c) released = x.Destroy() && released;
  released = ibv_dealloc_pd(pd) == 0 && released;
  released = ibv_close_device(ctx) == 0 && released;
  exit(failures.load() != 0 ? 20 : released ? 0 : 21);
}

TEST(OneSidedTwoProcesses, AtomicHammerExactSum) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* counter = static_cast<uint64_t*>(mem) + 5;
  *counter = 1000;
  ibv_mr* mc = ibv_reg_mr(pd, mem, 4096, kAllRemote);
  ASSERT_NE(mc, nullptr);

  struct Kid {
    pid_t pid;
    int up, down;
  } kids[kChildren];
  std::vector<Conn> conns(kChildren * kThreads);
  for (auto& x : conns) ASSERT_TRUE(x.Create(ctx, pd));
  for (int k = 0; k < kChildren; ++k) {
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) HammerChild(up[1], down[0]);
    kids[k] = {pid, up[0], down[1]};
    close(up[1]);
    close(down[0]);
    Remote r[kThreads];
    for (int t = 0; t < kThreads; ++t)
      r[t] = {reinterpret_cast<uintptr_t>(counter), mc->rkey, conns[k * kThreads + t].qp->qp_num};
    ASSERT_TRUE(WriteAll(kids[k].down, r, sizeof r));
    for (int t = 0; t < kThreads; ++t) {
      uint32_t qpn = 0;
      ASSERT_TRUE(ReadAll(kids[k].up, &qpn, 4));
      ASSERT_TRUE(conns[k * kThreads + t].Connect(ctx, gid, qpn));
    }
  }
  // The parent's own thread: a loopback pair onto its own counter.
  Conn self_a, self_b;
  ASSERT_TRUE(self_a.Create(ctx, pd) && self_b.Create(ctx, pd));
  ASSERT_TRUE(self_a.Connect(ctx, gid, self_b.qp->qp_num));
  ASSERT_TRUE(self_b.Connect(ctx, gid, self_a.qp->qp_num));
  alignas(8) static uint64_t result;
  ibv_mr* mres = ibv_reg_mr(pd, &result, 8, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mres, nullptr);

  for (auto& k : kids) ASSERT_TRUE(WriteAll(k.down, "g", 1));
  bool self_ok =
      Hammer(self_a, reinterpret_cast<uintptr_t>(counter), mc->rkey, &result, mres->lkey);
  EXPECT_TRUE(self_ok);
  for (auto& k : kids) {
    // Keep progress going for the two-copy path while waiting.
    int st = 0;
    uint64_t deadline = NowMs() + 60000;
    while (waitpid(k.pid, &st, WNOHANG) == 0 && NowMs() < deadline) {
      ibv_wc wc;
      for (auto& x : conns) ibv_poll_cq(x.cq, 1, &wc);
      usleep(200);
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    close(k.up);
    close(k.down);
  }
  EXPECT_EQ(*counter, 1000u + uint64_t{kChildren * kThreads + 1} * kOpsPerThread);
  ibv_dereg_mr(mres);
  ibv_dereg_mr(mc);
  for (Conn* x : {&self_a, &self_b}) {
    ibv_destroy_qp(x->qp);
    ibv_destroy_cq(x->cq);
  }
  for (auto& x : conns) {
    ibv_destroy_qp(x.qp);
    ibv_destroy_cq(x.cq);
  }
  munmap(mem, 4096);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// ------------------------------------------------------------------------
// Deregistration while another process keeps reading the region: dereg
// returns, the memory can be unmapped at once, and the reader's later
// READs fail with REM_ACCESS_ERR — no crash on either side.

[[noreturn]] void ReaderChild(int up, int down) {
  ChildSide side(30);
  auto& [ctx, gid, pd, c] = side;
  Remote target;
  if (!ReadAll(down, &target, sizeof target)) _exit(12);
  if (!c.Connect(ctx, gid, target.qpn)) _exit(13);
  if (!WriteAll(up, &c.qp->qp_num, 4)) _exit(14);
  std::vector<uint8_t> buf(65536);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) _exit(15);
  ibv_sge s{reinterpret_cast<uintptr_t>(buf.data()), 65536, mr->lkey};
  int ok = 0, status = 0;
  for (;;) {
    status = RunOne(c, IBV_WR_RDMA_READ, &s, 1, target.addr, target.rkey);
    if (status != IBV_WC_SUCCESS) break;
    if (buf[100] != 0x5a) _exit(16);       // a successful READ returns the data
    if (++ok == 20) WriteAll(up, "s", 1);  // started: the parent deregisters now
  }
  if (ibv_dereg_mr(mr) || !side.Release()) _exit(17);
  exit(ok >= 20 && status == IBV_WC_REM_ACCESS_ERR ? 0 : 20 + (ok < 20));
}

TEST(OneSidedTwoProcesses, DeregWhilePeerReads) {
  // Fork before this process creates its first QP: see ForkBeforeThreads in
  // two_process_conn.h.
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) ReaderChild(up[1], down[0]);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Conn c;
  ASSERT_TRUE(c.Create(ctx, pd));
  const size_t len = 1 << 20;
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  memset(mem, 0x5a, len);
  ibv_mr* mr = ibv_reg_mr(pd, mem, len, kAllRemote);
  ASSERT_NE(mr, nullptr);
  Remote r{reinterpret_cast<uintptr_t>(mem) + 4096, mr->rkey, c.qp->qp_num};
  ASSERT_TRUE(WriteAll(down[1], &r, sizeof r));
  uint32_t qpn = 0;
  ASSERT_TRUE(ReadAll(up[0], &qpn, 4));
  ASSERT_TRUE(c.Connect(ctx, gid, qpn));
  char started;
  ASSERT_TRUE(ReadAll(up[0], &started, 1));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  // The region is gone for every initiator: the memory may go away now.
  ASSERT_EQ(munmap(mem, len), 0);
  int st = WaitChildPolling(child, c.cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  ibv_destroy_qp(c.qp);
  ibv_destroy_cq(c.cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

}  // namespace
}  // namespace softrdma::test
