// The softrdma command: `softrdma run`, `softrdma doctor`, `--version`.
#include <cstdio>
#include <cstring>

#include "cli/doctor.h"
#include "cli/exit_codes.h"
#include "cli/run_command.h"
#include "cli/usage.h"
#include "cli/version.h"

namespace {

using namespace softrdma::cli;

bool IsHelp(const char* arg) {
  return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0;
}

int PrintVersion() {
  std::printf("softrdma %s (%s ABI: libibverbs.so.%s, librdmacm.so.%s)\n", kSoftrdmaVersion,
              kRdmaCoreAbi, kVerbsLibraryVersion, kRdmacmLibraryVersion);
  return kExitOk;
}

int Help(int argc, char** args) {
  if (argc == 0) {
    std::fputs(kMainUsage, stdout);
  } else if (std::strcmp(args[0], "run") == 0) {
    std::fputs(kRunUsage, stdout);
  } else if (std::strcmp(args[0], "doctor") == 0) {
    std::fputs(kDoctorUsage, stdout);
  } else {
    std::fprintf(stderr, "softrdma help: unknown subcommand '%s'\n", args[0]);
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kMainUsage, stderr);
    return kExitUsage;
  }
  const char* sub = argv[1];
  char** rest = argv + 2;
  const int nrest = argc - 2;
  if (IsHelp(sub)) return Help(0, rest);
  if (std::strcmp(sub, "--version") == 0 || std::strcmp(sub, "version") == 0) return PrintVersion();
  if (std::strcmp(sub, "help") == 0) return Help(nrest, rest);
  if (std::strcmp(sub, "run") == 0) return RunCommand(nrest, rest);
  if (std::strcmp(sub, "doctor") == 0) return Doctor(nrest, rest);
  std::fprintf(stderr, "softrdma: unknown subcommand or option '%s'\n%s", sub, kMainUsage);
  return kExitUsage;
}
