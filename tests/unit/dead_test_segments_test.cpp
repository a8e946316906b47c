// A test process that starts (testing::UseOwnNamespace) removes what test
// processes that were killed left in /dev/shm: their own namespace's
// segments, of this user, and only once their pid is gone.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine_test_support.h"

namespace softrdma {
namespace {

// A pid that no longer runs: a child that exited and was reaped.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

bool Exists(const std::string& name) {
  return access(("/dev/shm/" + name).c_str(), F_OK) == 0;
}

void Create(const std::string& name) {
  const int fd = open(("/dev/shm/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << name;
  close(fd);
}

TEST(DeadTestSegments, ThoseOfAKilledTestProcessGoWhenTheNextStarts) {
  const pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  const std::string uid = std::to_string(getuid());
  const std::string other_uid = std::to_string(getuid() + 1);
  const std::string ut_dead = "softrdma-ut" + std::to_string(dead) + "-";
  const std::string vt_dead = "softrdma-vt" + std::to_string(dead) + "-";
  const std::vector<std::string> removed = {
      ut_dead + uid + "-registry", ut_dead + uid + "-proc-0-1", vt_dead + uid + "-proc-1-2"};
  const std::vector<std::string> kept = {
      ut_dead + other_uid + "-registry",                                     // another user's
      "softrdma-ut" + std::to_string(getpid()) + "-" + uid + "-proc-77-77",  // alive: ours
      "softrdma-" + std::to_string(dead) + "-" + uid + "-registry",  // not a test's namespace
  };
  struct RemoveAtEnd {  // whatever the outcome
    std::vector<std::string> names;
    ~RemoveAtEnd() {
      for (const std::string& name : names) unlink(("/dev/shm/" + name).c_str());
    }
  } remove_at_end{removed};
  remove_at_end.names.insert(remove_at_end.names.end(), kept.begin(), kept.end());
  for (const std::string& name : removed) ASSERT_NO_FATAL_FAILURE(Create(name));
  for (const std::string& name : kept) ASSERT_NO_FATAL_FAILURE(Create(name));
  testing::UseOwnNamespace();
  for (const std::string& name : removed) EXPECT_FALSE(Exists(name)) << name << " was left";
  for (const std::string& name : kept) EXPECT_TRUE(Exists(name)) << name << " was removed";
}

}  // namespace
}  // namespace softrdma
