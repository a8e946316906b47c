// The host registry: QPN uniqueness and ownership, reclaiming what dead
// processes held.
#include "host/registry.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "wire/shm/shm_region.h"

namespace softrdma {
namespace {

// Each test uses its own namespace and removes it; the config is read once
// per process, so the namespace is set before the first use in this binary.
class RegistryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ns_ = "ut" + std::to_string(getpid());
    setenv("SOFTRDMA_NAMESPACE", ns_.c_str(), 1);
  }
  static void TearDownTestSuite() { shm::ShmRegion::Unlink(Registry::RegistryName()); }
  static std::string ns_;
};
std::string RegistryTest::ns_;

TEST_F(RegistryTest, QpnsAreUniqueAndOwned) {
  Registry reg;
  ASSERT_TRUE(Registry::Open(&reg).ok());
  ProcRef me;
  ASSERT_TRUE(reg.AttachProcess(&me, nullptr).ok());
  EXPECT_EQ(reg.LivePid(me), getpid());
  std::set<uint32_t> seen;
  for (int i = 0; i < 1000; ++i) {
    uint32_t qpn = 0;
    ASSERT_TRUE(reg.AllocQpn(me, &qpn).ok());
    EXPECT_GE(qpn, kFirstQpn);
    EXPECT_TRUE(seen.insert(qpn).second) << "QPN handed out twice: " << qpn;
    ProcRef owner;
    ASSERT_TRUE(reg.LookupQpn(qpn, &owner));
    EXPECT_EQ(owner, me);
  }
  for (uint32_t qpn : seen) reg.FreeQpn(me, qpn);
  ProcRef owner;
  EXPECT_FALSE(reg.LookupQpn(*seen.begin(), &owner));
  reg.DetachProcess(me);
  EXPECT_EQ(reg.LivePid(me), 0);
}

// Each registry hands out QPNs of its own range (host/qpn_range.h): the
// slot in the high bits says which registry a QPN is of, and another
// range's QPN with the same index is not ours.
TEST_F(RegistryTest, QpnsAreOfTheRegistrysOwnRange) {
  Registry reg;
  ASSERT_TRUE(Registry::Open(&reg).ok());
  EXPECT_EQ(reg.qpn_slot(), QpnSlotFor(ns_, getuid()));
  ProcRef me;
  ASSERT_TRUE(reg.AttachProcess(&me, nullptr).ok());
  uint32_t qpn = 0;
  ASSERT_TRUE(reg.AllocQpn(me, &qpn).ok());
  EXPECT_EQ(QpnSlotOf(qpn), reg.qpn_slot());
  EXPECT_LT(qpn, 1u << 24);
  EXPECT_GE(QpnIndexOf(qpn), kFirstQpn);
  EXPECT_TRUE(reg.OwnsQpn(qpn));
  EXPECT_NE(reg.published_qp(qpn), nullptr);
  const uint32_t other_slot = (reg.qpn_slot() + 1) % kQpnSlots;
  const uint32_t same_index_elsewhere = QpnInSlot(other_slot, QpnIndexOf(qpn));
  EXPECT_FALSE(reg.OwnsQpn(same_index_elsewhere));
  ProcRef owner;
  EXPECT_FALSE(reg.QpnOwner(same_index_elsewhere, &owner));
  EXPECT_FALSE(reg.LookupQpn(same_index_elsewhere, &owner));
  EXPECT_EQ(reg.published_qp(same_index_elsewhere), nullptr);
  EXPECT_EQ(reg.IndexOf(same_index_elsewhere), kQpnTableSize);
  EXPECT_EQ(reg.IndexOf(0xffffffffu), kQpnTableSize) << "not even a 24-bit QPN";
  reg.FreeQpn(me, same_index_elsewhere);  // not ours: changes nothing
  ASSERT_TRUE(reg.LookupQpn(qpn, &owner));
  reg.FreeQpn(me, qpn);
  EXPECT_FALSE(reg.LookupQpn(qpn, &owner));
  reg.DetachProcess(me);
}

// The slots: the user's default registry by uid (root's QPNs are those of
// before ranges existed; nearby uids never collide), namespaces hashed in;
// never slot 127, whose last QPN would be 0xffffff (multicast).
TEST(QpnRange, SlotsOfUsersAndNamespaces) {
  EXPECT_EQ(QpnSlotFor("", 0), 0u);
  EXPECT_EQ(QpnSlotFor("", 65534), 65534u % 127);
  std::set<uint32_t> slots;
  for (uid_t uid = 1000; uid < 1000 + kQpnSlots; ++uid) slots.insert(QpnSlotFor("", uid));
  EXPECT_EQ(slots.size(), size_t{kQpnSlots}) << "127 consecutive uids, 127 slots";
  for (uid_t uid : {0u, 1u, 1000u, 65534u, 4294967294u}) {
    for (const char* ns : {"", "a", "b", "ut123", "cm-test"}) {
      EXPECT_LT(QpnSlotFor(ns, uid), kQpnSlots);
      EXPECT_EQ(QpnSlotFor(ns, uid), QpnSlotFor(ns, uid)) << "deterministic";
    }
  }
  EXPECT_NE(QpnSlotFor("a", 0), QpnSlotFor("b", 0));
  EXPECT_EQ(QpnInSlot(kQpnSlots - 1, kQpnTableSize - 1), 0xfdffffu) << "below 0xffffff";
  EXPECT_EQ(QpnSlotOf(QpnInSlot(5, 0x11)), 5u);
  EXPECT_EQ(QpnIndexOf(QpnInSlot(5, 0x11)), 0x11u);
}

TEST_F(RegistryTest, DeadProcessIsReclaimed) {
  // A child attaches, allocates a QPN and dies by SIGKILL without cleanup.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Registry reg;
    ProcRef me;
    uint32_t qpn = 0;
    if (!Registry::Open(&reg).ok() || !reg.AttachProcess(&me, nullptr).ok() ||
        !reg.AllocQpn(me, &qpn).ok())
      _exit(1);
    uint32_t msg[3] = {me.slot, me.gen, qpn};
    if (write(fds[1], msg, sizeof msg) != sizeof msg) _exit(2);
    pause();
    _exit(0);
  }
  close(fds[1]);
  uint32_t msg[3];
  ASSERT_EQ(read(fds[0], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
  close(fds[0]);
  ProcRef dead{msg[0], msg[1]};
  Registry reg;
  ASSERT_TRUE(Registry::Open(&reg).ok());
  ProcRef owner;
  ASSERT_TRUE(reg.LookupQpn(msg[2], &owner));
  EXPECT_EQ(owner, dead);

  kill(child, SIGKILL);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(reg.LivePid(dead), 0);
  EXPECT_FALSE(reg.LookupQpn(msg[2], &owner)) << "a dead process's QPN still resolves";

  // The next attach takes the dead slot over, with a new generation, and is
  // told to clean up after the previous owner.
  static ProcRef reclaimed;
  reclaimed = ProcRef{~0u, ~0u};
  ProcRef me;
  ASSERT_TRUE(reg.AttachProcess(&me, [](ProcRef r) { reclaimed = r; }).ok());
  EXPECT_EQ(me.slot, dead.slot);
  EXPECT_NE(me.gen, dead.gen);
  EXPECT_EQ(reclaimed, dead);
  reg.DetachProcess(me);
}

}  // namespace
}  // namespace softrdma
