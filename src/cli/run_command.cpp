#include "cli/run_command.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/device_query.h"
#include "cli/exit_codes.h"
#include "cli/mount_stage.h"
#include "cli/namespace_entry.h"
#include "cli/sysfs_tree.h"
#include "cli/tree_writer.h"
#include "cli/usage.h"
#include "cli/userns_advice.h"

namespace softrdma::cli {

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "softrdma run: %s\n", message.c_str());
  return kExitRunFailed;
}

int ReportRefusedNamespaces(const NamespaceEntry& entry, const std::string& lib_dir) {
  std::fprintf(stderr,
               "softrdma run: this system refuses the namespaces softrdma run needs (%s: %s)\n",
               entry.step.c_str(), std::strerror(entry.err));
  std::fprintf(stderr, "softrdma run: to enable them:\n");
  for (const std::string& line : UsernsAdvice(ReadUsernsFacts(), entry.err)) {
    std::fprintf(stderr, "  - %s\n", line.c_str());
  }
  std::fprintf(stderr,
               "softrdma run: programs that only use libibverbs run without it: "
               "LD_LIBRARY_PATH=%s CMD\n",
               lib_dir.c_str());
  return kExitNamespacesRefused;
}

// Queries the devices and writes their sysfs entries under `class_dir`, in a
// child process: the library may start threads and keep state, and neither
// must reach the command that later replaces this process.
bool WriteSysClassInChild(const std::string& class_dir, std::string* error) {
  const pid_t child = fork();
  if (child < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (child == 0) {
    std::vector<DeviceSnapshot> devices;
    std::string why;
    const bool ok = QueryDevices(&devices, &why) && mkdir(class_dir.c_str(), 0755) == 0 &&
                    WriteTree(class_dir, BuildSysClassTree(devices), &why);
    if (!ok)
      std::fprintf(stderr, "softrdma run: %s\n", why.empty() ? std::strerror(errno) : why.c_str());
    std::fflush(stderr);
    std::exit(ok ? 0 : 1);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = std::string("waitpid: ") + std::strerror(errno);
      return false;
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "could not read the RDMA devices from the library";
    return false;
  }
  return true;
}

// The uverbs node names, i.e. the directories of infiniband_verbs/ just
// written: /dev/infiniband then matches sysfs by construction.
std::vector<std::string> UverbsNodes(const std::string& class_dir) {
  std::vector<std::string> nodes;
  const std::string dir_path = class_dir + "/infiniband_verbs";
  if (DIR* dir = opendir(dir_path.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      struct stat st {};
      if (name == "." || name == "..") continue;
      if (lstat((dir_path + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        nodes.push_back(name);
      }
    }
    closedir(dir);
  }
  return nodes;
}

void PrependLibraryPath(const std::string& dir) {
  const char* old = std::getenv("LD_LIBRARY_PATH");
  const std::string value = (old != nullptr && *old != '\0') ? dir + ":" + old : dir;
  setenv("LD_LIBRARY_PATH", value.c_str(), 1);
}

// Everything between entering the namespaces and exec.
bool PrepareMounts(std::string* error) {
  std::string stage;
  if (!MountStage(&stage, error)) return false;
  const std::string class_dir = stage + "/sysclass";
  const std::string dev_dir = stage + "/dev";
  return WriteSysClassInChild(class_dir, error) &&
         BuildDevTree(dev_dir, UverbsNodes(class_dir), error) &&
         OverlaySysClass(class_dir, error) && ReplaceDev(dev_dir, error) &&
         UnmountStage(stage, error);
}

}  // namespace

int RunCommand(int argc, char** args) {
  int first = 0;
  if (argc > 0 && (std::strcmp(args[0], "--help") == 0 || std::strcmp(args[0], "-h") == 0)) {
    std::fputs(kRunUsage, stdout);
    return kExitOk;
  }
  if (argc > 0 && std::strcmp(args[0], "--") == 0) {
    first = 1;
  } else if (argc > 0 && args[0][0] == '-') {
    std::fprintf(stderr,
                 "softrdma run: unknown option '%s' (put -- before a command starting with -)\n%s",
                 args[0], kRunUsage);
    return kExitRunFailed;
  }
  if (first >= argc) {
    std::fprintf(stderr, "softrdma run: no command given\n%s", kRunUsage);
    return kExitRunFailed;
  }

  const std::string lib_dir = LoadedVerbsLibraryDir();
  if (lib_dir.empty()) return Fail("cannot tell where libibverbs.so.1 was loaded from");

  const NamespaceEntry entry = EnterPrivateMountNamespace();
  if (!entry.ok && entry.refused) return ReportRefusedNamespaces(entry, lib_dir);
  if (!entry.ok) return Fail(entry.step + ": " + std::strerror(entry.err));

  std::string error;
  if (!PrepareMounts(&error)) return Fail(error);

  PrependLibraryPath(lib_dir);
  char** command = args + first;
  execvp(command[0], command);
  const int err = errno;
  std::fprintf(stderr, "softrdma run: %s: %s\n", command[0], std::strerror(err));
  return err == ENOENT ? kExitNotFound : kExitCannotExecute;
}

}  // namespace softrdma::cli
