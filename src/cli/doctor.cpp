#include "cli/doctor.h"

#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "cli/doctor_findings.h"
#include "cli/doctor_probes.h"
#include "cli/exit_codes.h"
#include "cli/usage.h"
#include "cli/version.h"

namespace softrdma::cli {

namespace {

const char* LevelTag(Level level) {
  switch (level) {
    case Level::kOk:
      return "[ok]     ";
    case Level::kWarning:
      return "[warning]";
    case Level::kFailure:
      return "[FAILED] ";
  }
  return "[?]      ";
}

void Print(const Finding& f) {
  std::printf("%s %s: %s\n", LevelTag(f.level), f.check.c_str(), f.summary.c_str());
  for (const std::string& line : f.advice) std::printf("          change: %s\n", line.c_str());
}

}  // namespace

int Doctor(int argc, char** args) {
  if (argc > 0 && (std::strcmp(args[0], "--help") == 0 || std::strcmp(args[0], "-h") == 0)) {
    std::fputs(kDoctorUsage, stdout);
    return kExitOk;
  }
  if (argc > 0) {
    std::fprintf(stderr, "softrdma doctor: unexpected argument '%s'\n%s", args[0], kDoctorUsage);
    return kExitUsage;
  }
  std::printf("softrdma doctor (softrdma %s)\n", kSoftrdmaVersion);
  std::fflush(stdout);

  // The probes fork; they run before the library is loaded into use here,
  // while this process has a single thread.
  std::vector<Finding> findings;
  findings.push_back(AssessShm(ProbeShm()));
  findings.push_back(AssessCma(ProbeCma()));
  RunFacts run;
  run.is_root = geteuid() == 0;
  run.userns = ReadUsernsFacts();
  run.probe = ProbeRun(false);
  if (run.is_root) {
    run.probed_unprivileged = true;
    run.unprivileged = ProbeRun(true);
  }
  findings.push_back(AssessRun(run));
  findings.insert(findings.begin(), AssessLibrary(ProbeLibrary()));

  for (const Finding& f : findings) Print(f);
  return DoctorExitStatus(findings);
}

}  // namespace softrdma::cli
