// Sharing a PD and its MRs through a context's cmd_fd: ibv_import_device,
// ibv_import_pd, ibv_import_mr and the unimports, in the exporting process
// (what pyverbs' test_shared_pd does) and in another process that received
// the descriptor over a Unix socket. In both, the importer posts with the
// imported lkey and a peer reaches the memory with the rkey through a QP of
// either process.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "process_pipes.h"
#include "two_process_conn.h"
#include "verbs_fixture.h"

namespace softrdma::test {
namespace {

constexpr size_t kPart = 4096 + 100;  // crosses a page boundary
constexpr size_t kBufBytes = 4 * 4096 * 2;

bool MapMrDisabled() {
  const char* v = getenv("SOFTRDMA_MAP_MR");
  return v && strcmp(v, "0") == 0;
}

void Fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 8));
}

TEST(ImportDevice, RejectsWhatIsNotAContextsCmdFd) {
  errno = 0;
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_EQ(errno, EBADF);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(p[0]), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // Left open on failure: it is still the caller's.
  EXPECT_NE(fcntl(p[0], F_GETFD), -1);
  close(p[0]);
  close(p[1]);
}

TEST(ImportDevice, UnknownHandlesAndAForeignPdAreRefused) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_pd* other = ibv_alloc_pd(ctx);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(pd && other && mr);
  ibv_context* imp = ibv_import_device(dup(ctx->cmd_fd));
  ASSERT_NE(imp, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(imp, 4000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_pd* other_imp = ibv_import_pd(imp, other->handle);
  ASSERT_NE(other_imp, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(other_imp, mr->handle), nullptr);  // mr is pd's, not other's
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(other_imp, mr->handle + 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_unimport_pd(other_imp);
  // A freed PD can no longer be imported.
  const uint32_t gone = other->handle;
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(imp, gone), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_close_device(imp), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

// As pyverbs' SharedPDTestCase: the exporter's own process imports its
// cmd_fd (a dup) and runs traffic on QPs of both contexts.
TEST(ImportDevice, SameProcessImportSharesKeysAndMemory) {
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  const int gid = LoopbackGidIndex(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  std::vector<uint8_t> buf(kBufBytes, 0);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), kAllRemote);
  ASSERT_TRUE(pd && mr);

  ibv_context* imp = ibv_import_device(dup(ctx->cmd_fd));
  ASSERT_NE(imp, nullptr);
  ibv_pd* ipd = ibv_import_pd(imp, pd->handle);
  ASSERT_NE(ipd, nullptr);
  EXPECT_EQ(ipd->handle, pd->handle);
  ibv_mr* imr = ibv_import_mr(ipd, mr->handle);
  ASSERT_NE(imr, nullptr);
  EXPECT_EQ(imr->lkey, mr->lkey);
  EXPECT_EQ(imr->rkey, mr->rkey);
  EXPECT_EQ(imr->length, mr->length);
  EXPECT_EQ(imr->handle, mr->handle);
  EXPECT_EQ(imr->addr, nullptr);  // as rdma-core: the kernel does not say

  Conn a, b;  // a on the exporter's PD, b on the imported one
  ASSERT_TRUE(a.Create(ctx, pd));
  ASSERT_TRUE(b.Create(imp, ipd));
  ASSERT_TRUE(a.Connect(ctx, gid, b.qp->qp_num));
  ASSERT_TRUE(b.Connect(imp, gid, a.qp->qp_num));

  uint8_t* p = buf.data();
  const uint64_t base = reinterpret_cast<uintptr_t>(p);
  Fill(p, kPart, 1);
  Fill(p + 2 * kPart, kPart, 2);
  // The importer's QP posts with the imported lkey; the rkey works through
  // the exporter's QP ...
  ibv_sge s1{base, static_cast<uint32_t>(kPart), imr->lkey};
  EXPECT_EQ(RunOne(b, IBV_WR_RDMA_WRITE, &s1, 1, base + kPart, mr->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(p + kPart, p, kPart), 0);
  // ... and the imported rkey through the importer's.
  ibv_sge s2{base + 2 * kPart, static_cast<uint32_t>(kPart), mr->lkey};
  EXPECT_EQ(RunOne(a, IBV_WR_RDMA_WRITE, &s2, 1, base + 3 * kPart, imr->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(p + 3 * kPart, p + 2 * kPart, kPart), 0);

  // A PD allocated on the imported context is published through the same
  // descriptor: the original context imports it back.
  ibv_pd* made_there = ibv_alloc_pd(imp);
  ASSERT_NE(made_there, nullptr);
  ibv_pd* back = ibv_import_pd(ctx, made_there->handle);
  EXPECT_NE(back, nullptr);
  ibv_unimport_pd(back);
  EXPECT_EQ(ibv_dealloc_pd(made_there), 0);

  EXPECT_TRUE(a.Destroy());
  EXPECT_TRUE(b.Destroy());
  ibv_unimport_mr(imr);
  ibv_unimport_pd(ipd);
  EXPECT_EQ(ibv_close_device(imp), 0);
  // The exporter's objects are untouched by the unimports.
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

// What the exporter tells the importer (with the descriptor).
struct Exported {
  uint32_t pd_handle, mr_handle, rkey, qpn;
  uint64_t iova;
};
// What the importer answers.
struct Imported {
  int32_t import_errno;  // 0 = the MR was imported
  uint32_t rkey, qpn;
};

bool SendWithFd(int sock, const Exported& e, int fd) {
  iovec iov{const_cast<Exported*>(&e), sizeof e};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return sendmsg(sock, &m, 0) == static_cast<ssize_t>(sizeof e);
}

int ReceiveWithFd(int sock, Exported* e) {
  iovec iov{e, sizeof *e};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(sizeof *e)) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

// The importer: the exporter's PD and MR, a QP of its own on that PD,
// one WRITE from the imported MR (imported lkey) into the exporter's memory.
[[noreturn]] void ImporterChild(int sock) {
  alarm(30);
  Exported e{};
  int fd = ReceiveWithFd(sock, &e);
  if (fd < 0) _exit(10);
  ibv_context* ctx = ibv_import_device(fd);
  if (!ctx) _exit(11);
  ibv_pd* pd = ibv_import_pd(ctx, e.pd_handle);
  if (!pd) _exit(12);
  Imported me{};
  ibv_mr* mr = ibv_import_mr(pd, e.mr_handle);
  if (!mr) {
    me.import_errno = errno;
    if (!WriteAll(sock, &me, sizeof me)) _exit(13);
    ibv_unimport_pd(pd);
    exit(ibv_close_device(ctx) == 0 ? 0 : 14);
  }
  if (mr->length != kBufBytes || mr->addr != nullptr) _exit(15);
  Conn c;
  if (!c.Create(ctx, pd)) _exit(16);
  me.rkey = mr->rkey;
  me.qpn = c.qp->qp_num;
  if (!WriteAll(sock, &me, sizeof me)) _exit(17);
  if (!c.Connect(ctx, LoopbackGidIndex(ctx), e.qpn)) _exit(18);
  // Bytes [0, kPart) -> [kPart, 2 kPart): addresses are the exporter's
  // (the imported MR's iova).
  ibv_sge s{e.iova, static_cast<uint32_t>(kPart), mr->lkey};
  if (RunOne(c, IBV_WR_RDMA_WRITE, &s, 1, e.iova + kPart, e.rkey) != IBV_WC_SUCCESS) _exit(19);
  char done = 'w';
  if (!WriteAll(sock, &done, 1)) _exit(20);
  // Keep the QP up (and its ring drained) until the exporter is done.
  char bye = 0;
  if (!ReadAll(sock, &bye, 1)) _exit(21);
  if (!c.Destroy()) _exit(22);
  ibv_unimport_mr(mr);
  ibv_unimport_pd(pd);
  exit(ibv_close_device(ctx) == 0 ? 0 : 23);
}

TEST(ImportDevice, AnotherProcessImportsThroughAUnixSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  pid_t child = fork();  // before the first QP (see ForkBeforeThreads)
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(sv[0]);
    ImporterChild(sv[1]);
  }
  close(sv[1]);
  ibv_context* ctx = OpenSoftrdma();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  // Whole pages of anonymous memory: what softrdma can share (docs/design.md).
  void* mem = mmap(nullptr, kBufBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* p = static_cast<uint8_t*>(mem);
  memset(p, 0, kBufBytes);
  Fill(p, kPart, 7);
  Fill(p + 2 * kPart, kPart, 9);
  ibv_mr* mr = ibv_reg_mr(pd, p, kBufBytes, kAllRemote);
  Conn c;
  ASSERT_TRUE(pd && mr && c.Create(ctx, pd));
  const uint64_t base = reinterpret_cast<uintptr_t>(p);
  Exported e{pd->handle, mr->handle, mr->rkey, c.qp->qp_num, base};
  int fd = dup(ctx->cmd_fd);
  ASSERT_TRUE(SendWithFd(sv[0], e, fd));
  close(fd);
  Imported them{};
  ASSERT_TRUE(ReadAll(sv[0], &them, sizeof them));
  if (MapMrDisabled()) {
    // Without exported pages the importer cannot reach the memory: the
    // documented failure (docs/abi.md), and nothing else breaks.
    EXPECT_EQ(them.import_errno, EOPNOTSUPP);
  } else {
    ASSERT_EQ(them.import_errno, 0) << strerror(them.import_errno);
    ASSERT_TRUE(c.Connect(ctx, LoopbackGidIndex(ctx), them.qpn));
    char done = 0;
    // Poll while waiting: on the two-copy path our side must make progress.
    ASSERT_TRUE(ReadAll(sv[0], &done, 1));
    EXPECT_EQ(memcmp(p + kPart, p, kPart), 0) << "the importer's WRITE from the imported MR";
    // The importer's rkey, through the importer's QP, lands in our pages.
    ibv_sge s{base + 2 * kPart, static_cast<uint32_t>(kPart), mr->lkey};
    EXPECT_EQ(RunOne(c, IBV_WR_RDMA_WRITE, &s, 1, base + 3 * kPart, them.rkey), IBV_WC_SUCCESS);
    EXPECT_EQ(memcmp(p + 3 * kPart, p + 2 * kPart, kPart), 0);
    char bye = 'b';
    EXPECT_TRUE(WriteAll(sv[0], &bye, 1));
  }
  int st = WaitChildPolling(child, c.cq);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_TRUE(c.Destroy());
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
  munmap(mem, kBufBytes);
  close(sv[0]);
}

}  // namespace
}  // namespace softrdma::test
