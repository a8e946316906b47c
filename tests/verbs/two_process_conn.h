// One RC connection between two processes for the multi-process tests: a
// QP with its own CQ, what one side tells the other to reach its memory,
// and posting one WR and waiting for its completion.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "verbs_fixture.h"

namespace softrdma::test {

inline constexpr int kAllRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

inline bool CmaDisabled() {
  const char* v = getenv("SOFTRDMA_CMA");
  return v && strcmp(v, "0") == 0;
}

// What one side tells the other to reach its memory.
struct Remote {
  uint64_t addr;
  uint32_t rkey;
  uint32_t qpn;
};

// One RC QP with its own CQ; INIT with every remote access.
struct Conn {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  bool Create(ibv_context* ctx, ibv_pd* pd) {
    cq = ibv_create_cq(ctx, 128, nullptr, nullptr, 0);
    QpParams p;
    qp = cq ? CreateRcQp(pd, cq, cq, p) : nullptr;
    if (!qp) return false;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  }
  bool Connect(ibv_context* ctx, int gid, uint32_t qpn) {
    return test::Connect(ctx, qp, gid, qpn, QpParams{}) == 0;
  }
  // Destroys the QP and the CQ; true if all of it went.
  bool Destroy() {
    bool ok = !qp || ibv_destroy_qp(qp) == 0;
    ok = (!cq || ibv_destroy_cq(cq) == 0) && ok;
    qp = nullptr;
    cq = nullptr;
    return ok;
  }
};

inline int PostOne(ibv_qp* qp, ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t rkey,
                   uint64_t compare_add = 0, uint64_t swap = 0) {
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = op;
  wr.sg_list = sg;
  wr.num_sge = n;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

// Posts one WR and waits for its completion; returns its status (or -1).
inline int RunOne(Conn& c, ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t rkey,
                  uint64_t compare_add = 0, uint64_t swap = 0) {
  if (PostOne(c.qp, op, sg, n, raddr, rkey, compare_add, swap)) return -1;
  auto wc = PollN(c.cq, 1, 10000);
  return wc.size() == 1 ? wc[0].status : -1;
}

// ForkBeforeThreads: the two-process tests fork their child before the parent
// creates its first QP, which starts the process's progress thread. Under
// ASan (GCC 12's runtime has no fork handlers for its allocator) a fork while
// that thread is starting up or allocating can copy an allocator lock held by
// it into the child, where nobody ever releases it: the child's own progress
// thread then blocks at its start, and the child hangs at exit joining it.
// (In a process that ran other tests first the thread already exists, idle.)

// The usual start of a child process: bounded by an alarm, the device open,
// its loopback GID, a PD and one connection in INIT. Exits with 10 / 11 if
// any of it fails. A child that exit()s releases it first (Release(), after
// deregistering its own MRs): LeakSanitizer checks the child at exit too.
struct ChildSide {
  ibv_context* ctx = nullptr;
  int gid = -1;
  ibv_pd* pd = nullptr;
  Conn c;
  explicit ChildSide(unsigned alarm_s) {
    alarm(alarm_s);
    ctx = OpenSoftrdma();
    if (!ctx) _exit(10);
    gid = LoopbackGidIndex(ctx);
    pd = ibv_alloc_pd(ctx);
    if (!pd || !c.Create(ctx, pd)) _exit(11);
  }
  // Destroys the connection and the PD and closes the device; true if all of
  // it went.
  bool Release() {
    bool ok = c.Destroy();
    ok = (!pd || ibv_dealloc_pd(pd) == 0) && ok;
    ok = (!ctx || ibv_close_device(ctx) == 0) && ok;
    pd = nullptr;
    ctx = nullptr;
    return ok;
  }
};

// Waits (at most timeout_ms) for the child `pid` to exit while polling `cq`,
// so that our side of the two-copy path keeps making progress; returns its
// wait status, or -1 if it did not exit in time (which no WIFEXITED check
// accepts; the child's own alarm ends it).
inline int WaitChildPolling(pid_t pid, ibv_cq* cq, uint64_t timeout_ms = 20000) {
  int st = 0;
  const uint64_t deadline = NowMs() + timeout_ms;
  while (NowMs() < deadline) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    ibv_wc wc;
    ibv_poll_cq(cq, 1, &wc);
    usleep(200);
  }
  return -1;
}

}  // namespace softrdma::test
