// Runs the verbs tests in a private shared-memory namespace and removes
// every object of that namespace afterwards, whatever the outcome.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "../unit/dead_test_segments.h"

namespace {

std::string g_namespace;

void RemoveNamespaceObjects() {
  if (g_namespace.empty()) return;
  const std::string prefix = "softrdma-" + g_namespace + "-";
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
      unlink(("/dev/shm/" + std::string(e->d_name)).c_str());
  }
  closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  softrdma::testing::RemoveSegmentsOfDeadTestProcesses();  // of killed runs
  if (!getenv("SOFTRDMA_NAMESPACE")) {
    g_namespace = "vt" + std::to_string(getpid());
    setenv("SOFTRDMA_NAMESPACE", g_namespace.c_str(), 1);
  }
  int rc = RUN_ALL_TESTS();
  // The library removes its own segment at exit (after this returns); the
  // registry stays, so remove the namespace once the process is done.
  if (!g_namespace.empty()) atexit(RemoveNamespaceObjects);
  return rc;
}
