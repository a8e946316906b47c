// A target process killed (SIGKILL) while an initiator streams RDMA WRITEs,
// READs, atomics or SENDs at it: on every data path (mapped memory by default, cross-memory
// attach with SOFTRDMA_MAP_MR=0, the two-copy path with SOFTRDMA_CMA=0 too;
// ctest runs this file on all three), the initiator's WQEs stop succeeding:
// the first failure is IBV_WC_RETRY_EXC_ERR, every later one
// IBV_WC_WR_FLUSH_ERR, and no WQE posted once the QP's retry bound
// (timeout x (retry_cnt + 1)) has passed after the kill completes with
// success: nothing is reported as placed into the memory of a process that
// no longer exists.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "process_pipes.h"
#include "two_process_conn.h"

namespace softrdma::test {
namespace {

constexpr size_t kTargetBytes = 1 << 20;
constexpr uint32_t kWriteBytes = 64 * 1024;

// Enough receives for every SEND of the stream while the target lives (it
// reposts each one as it completes).
constexpr int kChildReceives = 48;

// Child: a region open for remote access, receives posted, connected; then
// reposts receives until it is killed.
[[noreturn]] void ChildTarget(int to_parent, int from_parent) {
  ChildSide s(30);
  // Whole pages, as perftest allocates them: by default registration moves
  // them into shared memory the initiator maps (the memcpy path).
  void* mem = aligned_alloc(4096, kTargetBytes);
  if (!mem) _exit(12);
  ibv_mr* mr = ibv_reg_mr(s.pd, mem, kTargetBytes, kAllRemote);
  if (!mr) _exit(12);
  Remote me{reinterpret_cast<uintptr_t>(mem), mr->rkey, s.c.qp->qp_num};
  auto post_recv = [&](uint64_t slot) {
    ibv_sge sg{reinterpret_cast<uintptr_t>(mem) + (slot % 16) * kWriteBytes, kWriteBytes, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(s.c.qp, &wr, &bad) == 0;
  };
  for (int i = 0; i < kChildReceives; ++i)
    if (!post_recv(static_cast<uint64_t>(i))) _exit(15);
  uint32_t peer_qpn = 0;
  if (!WriteAll(to_parent, &me, sizeof me) || !ReadAll(from_parent, &peer_qpn, 4)) _exit(13);
  if (!s.c.Connect(s.ctx, s.gid, peer_qpn)) _exit(14);
  char ready = 'r';
  WriteAll(to_parent, &ready, 1);
  for (;;) {
    ibv_wc wc[8];
    int n = ibv_poll_cq(s.c.cq, 8, wc);
    for (int i = 0; i < n; ++i)
      if (wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV) post_recv(wc[i].wr_id);
    if (n == 0) usleep(100);
  }
}

class DeadPeer : public ::testing::TestWithParam<ibv_wr_opcode> {};

// The WR of the stream: 64 KiB for WRITE, READ and SEND, 8 bytes for atomics.
ibv_send_wr StreamWr(ibv_wr_opcode op, uint64_t id, ibv_sge* sg, const Remote& target) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  const uint64_t remote = target.addr + (id % 16) * kWriteBytes;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = target.rkey;
    wr.wr.atomic.compare_add = 1;
    wr.wr.atomic.swap = id;
  } else if (op != IBV_WR_SEND) {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = target.rkey;
  }
  return wr;
}

TEST_P(DeadPeer, KilledTargetFailsWithRetryExceededThenFlush) {
  const ibv_wr_opcode op = GetParam();
  const bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP;
  Child child = ForkChild(ChildTarget);
  ASSERT_GT(child.pid, 0);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  const int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  QpParams p;
  p.max_send_wr = 128;
  // 33.5 ms per try, a bound of 135 ms: long enough that a loaded 2-CPU
  // machine's scheduling of the death watch (seen up to 30 ms late) stays
  // inside it, while the 1.5 s after the kill still post many WQEs past it.
  p.timeout = 13;
  p.retry_cnt = 3;
  ibv_qp* qp = pd && cq ? CreateRcQp(pd, cq, cq, p) : nullptr;
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(ToInit(qp), 0);
  Remote target{};
  ASSERT_TRUE(ReadAll(child.from_child, &target, sizeof target));
  ASSERT_TRUE(WriteAll(child.to_child, &qp->qp_num, 4));
  ASSERT_EQ(Connect(ctx, qp, gid, target.qpn, p), 0);
  char ready;
  ASSERT_TRUE(ReadAll(child.from_child, &ready, 1));

  std::vector<uint8_t> src(kWriteBytes, 0x6b);
  ibv_mr* mr = ibv_reg_mr(pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge sg{reinterpret_cast<uintptr_t>(src.data()), atomic ? 8 : kWriteBytes, mr->lkey};

  // Keeps 8 WQEs outstanding; kills the target after 200 completions and
  // goes on for 1.5 s.
  const uint64_t bound_ms = (4096ull << p.timeout) * (p.retry_cnt + 1) / 1000000 + 1;
  std::map<uint64_t, uint64_t> posted_at;  // wr_id -> ms
  std::vector<ibv_wc> done;
  uint64_t next_id = 1, kill_ms = 0;
  while (kill_ms == 0 || NowMs() < kill_ms + 1500) {
    while (posted_at.size() < 8) {
      ibv_send_wr wr = StreamWr(op, next_id, &sg, target);
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
      posted_at[next_id++] = NowMs();
    }
    ibv_wc wc[8];
    int n = ibv_poll_cq(cq, 8, wc);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i) {
      done.push_back(wc[i]);
      ASSERT_EQ(posted_at.count(wc[i].wr_id), 1u) << "unknown or repeated wr_id " << wc[i].wr_id;
      const uint64_t at = posted_at[wc[i].wr_id];
      posted_at.erase(wc[i].wr_id);
      if (kill_ms != 0 && at > kill_ms + bound_ms) {
        EXPECT_NE(wc[i].status, IBV_WC_SUCCESS)
            << "WQE " << wc[i].wr_id << " posted " << at - kill_ms
            << " ms after the kill succeeded (bound " << bound_ms << " ms)";
      }
    }
    if (kill_ms == 0 && done.size() >= 200) {
      ASSERT_EQ(kill(child.pid, SIGKILL), 0);
      kill_ms = NowMs();
      int status = 0;
      ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
    }
  }
  // Before the kill: all successes. After the first failure: only failures,
  // the first one RETRY_EXC_ERR, the rest flushed.
  size_t first_error = done.size();
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].status != IBV_WC_SUCCESS) {
      first_error = i;
      break;
    }
  }
  ASSERT_LT(first_error, done.size()) << "no WQE failed after the target was killed";
  EXPECT_GE(first_error, 200u) << "a WQE failed before the kill";
  EXPECT_EQ(done[first_error].status, IBV_WC_RETRY_EXC_ERR)
      << ibv_wc_status_str(done[first_error].status);
  for (size_t i = first_error + 1; i < done.size(); ++i)
    ASSERT_EQ(done[i].status, IBV_WC_WR_FLUSH_ERR)
        << "completion " << i << ": " << ibv_wc_status_str(done[i].status);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);

  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  close(child.from_child);
  close(child.to_child);
}

INSTANTIATE_TEST_SUITE_P(EveryOperation, DeadPeer,
                         ::testing::Values(IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
                                           IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP,
                                           IBV_WR_SEND),
                         [](const ::testing::TestParamInfo<ibv_wr_opcode>& info) {
                           switch (info.param) {
                             case IBV_WR_RDMA_WRITE:
                               return std::string("Write");
                             case IBV_WR_RDMA_READ:
                               return std::string("Read");
                             case IBV_WR_ATOMIC_FETCH_AND_ADD:
                               return std::string("FetchAdd");
                             case IBV_WR_ATOMIC_CMP_AND_SWP:
                               return std::string("CompareSwap");
                             default:
                               return std::string("Send");
                           }
                         });

}  // namespace
}  // namespace softrdma::test
