// Two processes on one host: the shm wire between separate address spaces
// (one-copy pull or two-copy fragments), a peer killed mid-transfer, and a
// responder that stops polling after a message.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "process_pipes.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

struct Endpoint {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  int gid = -1;
  bool Open(const QpParams& p) {
    ctx = OpenSoftrdma();
    if (!ctx) return false;
    gid = LoopbackGidIndex(ctx);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    qp = pd && cq ? CreateRcQp(pd, cq, cq, p) : nullptr;
    return qp && gid >= 0 && ToInit(qp) == 0;
  }
  // Open, then the QPN exchange with the parent over the pipes and RTS
  // (the child's side): 0, or the child's exit code for the step that
  // failed (10 open, 11 exchange, 12 connect).
  int OpenAndConnectToParent(int to_parent, int from_parent, const QpParams& p) {
    if (!Open(p)) return 10;
    uint32_t my_qpn = qp->qp_num, peer_qpn = 0;
    if (!WriteAll(to_parent, &my_qpn, 4) || !ReadAll(from_parent, &peer_qpn, 4)) return 11;
    return Connect(ctx, qp, gid, peer_qpn, p) ? 12 : 0;
  }
  // The parent's side of the same.
  ::testing::AssertionResult OpenAndConnectToChild(const Child& c, const QpParams& p) {
    if (!Open(p)) return ::testing::AssertionFailure() << "open";
    uint32_t peer_qpn = 0, my_qpn = qp->qp_num;
    if (!ReadAll(c.from_child, &peer_qpn, 4) || !WriteAll(c.to_child, &my_qpn, 4))
      return ::testing::AssertionFailure() << "QPN exchange with the child";
    if (Connect(ctx, qp, gid, peer_qpn, p) != 0) return ::testing::AssertionFailure() << "connect";
    return ::testing::AssertionSuccess();
  }
  // Destroys what Open created; true if all of it went. A child that exit()s
  // calls it first: LeakSanitizer checks the child at exit too.
  bool Close() {
    bool ok = !qp || ibv_destroy_qp(qp) == 0;
    ok = (!cq || ibv_destroy_cq(cq) == 0) && ok;
    ok = (!pd || ibv_dealloc_pd(pd) == 0) && ok;
    ok = (!ctx || ibv_close_device(ctx) == 0) && ok;
    qp = nullptr;
    cq = nullptr;
    pd = nullptr;
    ctx = nullptr;
    return ok;
  }
};

constexpr size_t kBig = (1 << 20) + 3;

// Child: receives kBig bytes into two SGEs and reports the checksum.
[[noreturn]] void ChildReceiver(int to_parent, int from_parent) {
  alarm(20);  // never outlive a broken test
  Endpoint e;
  QpParams p;
  if (int err = e.OpenAndConnectToParent(to_parent, from_parent, p)) exit(err);
  std::vector<uint8_t> buf(kBig + 1100, 0);
  ibv_mr* mr = ibv_reg_mr(e.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) exit(13);
  ibv_sge sg[2] = {
      {reinterpret_cast<uintptr_t>(&buf[0]), 1000, mr->lkey},
      {reinterpret_cast<uintptr_t>(&buf[1000]), static_cast<uint32_t>(kBig), mr->lkey}};
  ibv_recv_wr wr{};
  wr.sg_list = sg;
  wr.num_sge = 2;
  ibv_recv_wr* bad;
  if (ibv_post_recv(e.qp, &wr, &bad)) exit(14);
  char ready = 'r';
  if (!WriteAll(to_parent, &ready, 1)) exit(15);
  auto wcs = PollN(e.cq, 1, 15000);
  if (wcs.size() != 1 || wcs[0].status != IBV_WC_SUCCESS || wcs[0].byte_len != kBig) exit(16);
  uint64_t sum = Checksum(buf.data(), kBig);
  if (!WriteAll(to_parent, &sum, 8)) exit(17);
  // Stay until the parent saw its send completion (our ACK went out).
  char done;
  (void)ReadAll(from_parent, &done, 1);
  if (ibv_dereg_mr(mr) || !e.Close()) exit(18);
  exit(0);  // exit(), not _exit(): the library removes its segment at exit
}

TEST(TwoProcesses, MegabyteSendArrivesIntact) {
  Child c = ForkChild(ChildReceiver);
  ASSERT_GT(c.pid, 0);
  const pid_t child = c.pid;
  Endpoint e;
  QpParams p;
  ASSERT_TRUE(e.OpenAndConnectToChild(c, p));
  std::vector<uint8_t> src(kBig);
  for (size_t i = 0; i < kBig; ++i) src[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  ibv_mr* mr = ibv_reg_mr(e.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  char ready;
  ASSERT_TRUE(ReadAll(c.from_child, &ready, 1));
  ibv_sge sg[3] = {
      {reinterpret_cast<uintptr_t>(&src[0]), 7, mr->lkey},
      {reinterpret_cast<uintptr_t>(&src[7]), 500000, mr->lkey},
      {reinterpret_cast<uintptr_t>(&src[500007]), static_cast<uint32_t>(kBig - 500007), mr->lkey}};
  ibv_send_wr wr{};
  wr.sg_list = sg;
  wr.num_sge = 3;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
  auto wcs = PollN(e.cq, 1, 15000);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  uint64_t sum = 0;
  ASSERT_TRUE(ReadAll(c.from_child, &sum, 8));
  EXPECT_EQ(sum, Checksum(src.data(), kBig));
  char done = 'd';
  WriteAll(c.to_child, &done, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ibv_dereg_mr(mr);
  e.Close();
}

// Child: connects and never posts a receive, then waits to be killed.
[[noreturn]] void ChildSilent(int to_parent, int from_parent) {
  alarm(20);
  Endpoint e;
  QpParams p;
  if (int err = e.OpenAndConnectToParent(to_parent, from_parent, p)) exit(err);
  char ready = 'r';
  WriteAll(to_parent, &ready, 1);
  for (;;) pause();
}

TEST(TwoProcesses, PeerKilledMidTransferEndsInRetryExceeded) {
  Child c = ForkChild(ChildSilent);
  ASSERT_GT(c.pid, 0);
  const pid_t child = c.pid;
  Endpoint e;
  QpParams p;
  p.timeout = 10;  // ~4 ms, rounded up to the 1 ms floor
  ASSERT_TRUE(e.OpenAndConnectToChild(c, p));
  char ready;
  ASSERT_TRUE(ReadAll(c.from_child, &ready, 1));
  std::vector<uint8_t> src(100000, 1);
  ibv_mr* mr = ibv_reg_mr(e.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sg{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(src.size()), mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);  // RNR-retried forever (rnr_retry 7)
  usleep(50000);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  auto wcs = PollN(e.cq, 1, 10000);
  ASSERT_EQ(wcs.size(), 1u) << "the send never completed after its peer died";
  EXPECT_EQ(wcs[0].status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wcs[0].status);
  ibv_dereg_mr(mr);
  e.Close();
}

// Child: posts one receive, then reports the first byte it receives.
[[noreturn]] void ChildReceivesOne(int to_parent, int from_parent) {
  alarm(20);
  Endpoint e;
  QpParams p;
  if (int err = e.OpenAndConnectToParent(to_parent, from_parent, p)) exit(err);
  std::vector<uint8_t> buf(64, 0);
  ibv_mr* mr = ibv_reg_mr(e.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) exit(13);
  ibv_sge sg{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sg;
  wr.num_sge = 1;
  ibv_recv_wr* bad;
  if (ibv_post_recv(e.qp, &wr, &bad)) exit(14);
  char ready = 'r';
  if (!WriteAll(to_parent, &ready, 1)) exit(15);
  auto wcs = PollN(e.cq, 1, 15000);
  if (wcs.size() != 1 || wcs[0].status != IBV_WC_SUCCESS) exit(16);
  if (!WriteAll(to_parent, &buf[0], 1)) exit(17);
  char done;
  (void)ReadAll(from_parent, &done, 1);
  if (ibv_dereg_mr(mr) || !e.Close()) exit(18);
  exit(0);
}

// A responder whose process does not run (stopped here; on a loaded host,
// not scheduled) for many times the requester's whole retry budget: what
// was sent waits in its ring, nothing is lost, so the SEND completes once
// it runs again instead of ending in RETRY_EXC_ERR (a NIC's responder
// answers whatever its host's CPU does).
TEST(TwoProcesses, ResponderThatDoesNotRunUsesUpNoRetries) {
  Child c = ForkChild(ChildReceivesOne);
  ASSERT_GT(c.pid, 0);
  const pid_t child = c.pid;
  Endpoint e;
  QpParams p;
  p.timeout = 10;   // ~4 ms per try
  p.retry_cnt = 1;  // the budget: ~8 ms
  ASSERT_TRUE(e.OpenAndConnectToChild(c, p));
  char ready;
  ASSERT_TRUE(ReadAll(c.from_child, &ready, 1));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  uint8_t byte = 0x5a;
  ibv_mr* mr = ibv_reg_mr(e.pd, &byte, 1, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge sg{reinterpret_cast<uintptr_t>(&byte), 1, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
  auto early = PollN(e.cq, 1, 300);  // ~35 budgets with the responder stopped
  EXPECT_TRUE(early.empty()) << "completed while the responder was stopped: "
                             << ibv_wc_status_str(early[0].status);
  ASSERT_EQ(kill(child, SIGCONT), 0);
  auto wcs = early.empty() ? PollN(e.cq, 1, 10000) : early;
  ASSERT_EQ(wcs.size(), 1u) << "the send never completed";
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  uint8_t got = 0;
  ASSERT_TRUE(ReadAll(c.from_child, &got, 1));
  EXPECT_EQ(got, 0x5a);
  char done = 'd';
  WriteAll(c.to_child, &done, 1);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ibv_dereg_mr(mr);
  e.Close();
}

// Child: receives two messages by polling, then makes no verbs call at all
// until the parent is done. While it polls for the second, its progress
// thread has settled into watching it poll, so the ACK of the second may be
// held back for a reply that never comes (transport/responder.cpp,
// "Deferred ACKs").
[[noreturn]] void ChildReceivesThenIdles(int to_parent, int from_parent) {
  alarm(20);
  Endpoint e;
  QpParams p;
  p.timeout = 20;
  if (int err = e.OpenAndConnectToParent(to_parent, from_parent, p)) exit(err);
  std::vector<uint8_t> buf(128, 0);
  ibv_mr* mr = ibv_reg_mr(e.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) exit(13);
  for (int i = 0; i < 2; ++i) {
    ibv_sge sg{reinterpret_cast<uintptr_t>(buf.data() + 64 * i), 64, mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sg;
    wr.num_sge = 1;
    ibv_recv_wr* bad;
    if (ibv_post_recv(e.qp, &wr, &bad)) exit(14);
  }
  char ready = 'r';
  if (!WriteAll(to_parent, &ready, 1)) exit(15);
  for (int i = 0; i < 2; ++i) {
    auto wcs = PollN(e.cq, 1, 15000);
    if (wcs.size() != 1 || wcs[0].status != IBV_WC_SUCCESS) exit(16);
  }
  char done;
  (void)ReadAll(from_parent, &done, 1);
  if (ibv_dereg_mr(mr) || !e.Close()) exit(17);
  exit(0);
}

// The responder's ACK arrives even though it neither replies nor polls
// again: its progress thread sends what the last poll held back, within
// about a millisecond, long before the requester's retransmission (~4 s).
TEST(TwoProcesses, AckArrivesWhenTheResponderStopsPolling) {
  Child c = ForkChild(ChildReceivesThenIdles);
  ASSERT_GT(c.pid, 0);
  const pid_t child = c.pid;
  Endpoint e;
  QpParams p;
  p.timeout = 20;  // 4.3 s: a retransmission cannot stand in for the ACK
  ASSERT_TRUE(e.OpenAndConnectToChild(c, p));
  char ready;
  ASSERT_TRUE(ReadAll(c.from_child, &ready, 1));
  std::vector<uint8_t> src(8, 7);
  ibv_mr* mr = ibv_reg_mr(e.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge sg{reinterpret_cast<uintptr_t>(src.data()), 8, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad;
  for (int i = 0; i < 2; ++i) {
    if (i == 1) usleep(20000);  // the child polls for the second one meanwhile
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
    auto wcs = PollN(e.cq, 1, 1500);
    ASSERT_EQ(wcs.size(), 1u) << "no ACK for message " << i;
    EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[0].status);
  }
  char done = 'd';
  WriteAll(c.to_child, &done, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ibv_dereg_mr(mr);
  e.Close();
}

}  // namespace
}  // namespace softrdma::test
