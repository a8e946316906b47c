// softrdma doctor's verdicts for given facts, and its exit status.
#include "cli/doctor_findings.h"

#include <cerrno>

#include <gtest/gtest.h>

#include "cli/exit_codes.h"

namespace softrdma::cli {
namespace {

bool AdviceMentions(const Finding& f, const std::string& text) {
  for (const std::string& line : f.advice) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(DoctorShm, RoomyWritableTmpfsIsOk) {
  ShmFacts facts{true, true, true, 8ull << 30, 6ull << 30};
  const Finding f = AssessShm(facts);
  EXPECT_EQ(f.level, Level::kOk);
  EXPECT_EQ(f.summary, "/dev/shm: tmpfs, 8.0 GiB, 6.0 GiB free");
  EXPECT_TRUE(f.advice.empty());
}

TEST(DoctorShm, SmallIsAWarningThatSaysHowToGrowIt) {
  ShmFacts facts{true, true, true, 64ull << 20, 60ull << 20};  // Docker's default
  const Finding f = AssessShm(facts);
  EXPECT_EQ(f.level, Level::kWarning);
  EXPECT_NE(f.summary.find("64 MiB"), std::string::npos) << f.summary;
  EXPECT_TRUE(AdviceMentions(f, "--shm-size"));
  EXPECT_TRUE(AdviceMentions(f, "SOFTRDMA_MAP_MR=0"));
}

TEST(DoctorShm, MissingOrReadOnlyIsAFailure) {
  EXPECT_EQ(AssessShm(ShmFacts{}).level, Level::kFailure);
  ShmFacts read_only{true, false, true, 8ull << 30, 8ull << 30};
  const Finding f = AssessShm(read_only);
  EXPECT_EQ(f.level, Level::kFailure);
  EXPECT_TRUE(AdviceMentions(f, "chmod 1777"));
}

TEST(DoctorCma, WorkingIsOk) {
  CmaFacts facts;
  facts.yama_ptrace_scope = 1;
  const Finding f = AssessCma(facts);
  EXPECT_EQ(f.level, Level::kOk);
  EXPECT_NE(f.summary.find("ptrace_scope 1"), std::string::npos);
}

TEST(DoctorCma, RefusedByYamaTwoSaysWhichSysctl) {
  CmaFacts facts;
  facts.probe_errno = EPERM;
  facts.yama_ptrace_scope = 2;
  const Finding f = AssessCma(facts);
  EXPECT_EQ(f.level, Level::kWarning);
  EXPECT_NE(f.summary.find("EPERM"), std::string::npos) << f.summary;
  EXPECT_TRUE(AdviceMentions(f, "kernel.yama.ptrace_scope=1"));
}

TEST(DoctorCma, RefusedBySeccompOrUnknown) {
  CmaFacts seccomp;
  seccomp.probe_errno = EPERM;
  seccomp.seccomp_mode = 2;
  EXPECT_TRUE(AdviceMentions(AssessCma(seccomp), "--cap-add SYS_PTRACE"));
  CmaFacts unknown;
  unknown.probe_errno = EACCES;
  EXPECT_TRUE(AdviceMentions(AssessCma(unknown), "security module"));
  CmaFacts nosys;
  nosys.probe_errno = ENOSYS;
  EXPECT_TRUE(AdviceMentions(AssessCma(nosys), "CONFIG_CROSS_MEMORY_ATTACH"));
}

TEST(DoctorRun, RefusedNamespacesGiveTheSysctlToChange) {
  RunFacts facts;
  facts.probe.refused = true;
  facts.probe.err = EPERM;
  facts.probe.error = "unshare(CLONE_NEWUSER|CLONE_NEWNS): Operation not permitted";
  facts.userns.max_user_namespaces = 0;
  const Finding f = AssessRun(facts);
  EXPECT_EQ(f.level, Level::kWarning);
  EXPECT_TRUE(AdviceMentions(f, "user.max_user_namespaces=15000"));
}

TEST(DoctorRun, RootReportsWhetherUnprivilegedUsersCanUseIt) {
  RunFacts facts;
  facts.is_root = true;
  facts.probe.ok = true;
  facts.probe.isolation = "mount namespace";
  facts.probed_unprivileged = true;
  facts.unprivileged.refused = true;
  facts.unprivileged.err = EPERM;
  facts.unprivileged.error = "unshare: Operation not permitted";
  facts.userns.unprivileged_userns_clone = 0;
  const Finding f = AssessRun(facts);
  EXPECT_EQ(f.level, Level::kOk);
  EXPECT_NE(f.summary.find("unprivileged users cannot"), std::string::npos) << f.summary;
  EXPECT_TRUE(AdviceMentions(f, "kernel.unprivileged_userns_clone=1"));
  EXPECT_FALSE(AdviceMentions(f, "run softrdma as root"));
}

TEST(DoctorLibrary, NoDeviceIsAFailure) {
  LibraryFacts facts;
  facts.dir = "/x/lib";
  facts.error = "ibv_get_device_list: no RDMA device listed";
  const Finding f = AssessLibrary(facts);
  EXPECT_EQ(f.level, Level::kFailure);
  EXPECT_NE(f.summary.find("no RDMA device listed"), std::string::npos);
}

TEST(DoctorExit, WorstLevelDecides) {
  Finding ok, warn, fail;
  warn.level = Level::kWarning;
  fail.level = Level::kFailure;
  EXPECT_EQ(DoctorExitStatus({ok, ok}), kExitOk);
  EXPECT_EQ(DoctorExitStatus({ok, warn}), kExitDoctorWarnings);
  EXPECT_EQ(DoctorExitStatus({warn, fail, ok}), kExitDoctorFailures);
}

}  // namespace
}  // namespace softrdma::cli
