// What `softrdma run` and `softrdma doctor` tell a user to enable.
#include "cli/userns_advice.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace softrdma::cli {
namespace {

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  return all;
}

TEST(UsernsAdvice, EachKnownKnobIsNamed) {
  UsernsFacts facts;
  facts.max_user_namespaces = 0;
  facts.unprivileged_userns_clone = 0;
  facts.apparmor_restrict = 1;
  const std::string text = Joined(UsernsAdvice(facts, EPERM));
  EXPECT_NE(text.find("sysctl -w user.max_user_namespaces=15000"), std::string::npos) << text;
  EXPECT_NE(text.find("sysctl -w kernel.unprivileged_userns_clone=1"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel.apparmor_restrict_unprivileged_userns=0"), std::string::npos) << text;
  EXPECT_EQ(text.find("seccomp"), std::string::npos) << text;
}

TEST(UsernsAdvice, LimitReached) {
  UsernsFacts facts;
  facts.max_user_namespaces = 10;
  EXPECT_NE(Joined(UsernsAdvice(facts, ENOSPC)).find("limit of user namespaces"),
            std::string::npos);
}

TEST(UsernsAdvice, SeccompWhenNoKnobExplainsIt) {
  UsernsFacts facts;
  facts.max_user_namespaces = 1000;
  facts.seccomp_mode = 2;
  EXPECT_NE(Joined(UsernsAdvice(facts, EPERM)).find("seccomp=unconfined"), std::string::npos);
}

TEST(UsernsAdvice, NeverEmptyAndEndsWithTheWayOutForRoot) {
  const auto advice = UsernsAdvice(UsernsFacts{}, 0);
  ASSERT_GE(advice.size(), 2u);
  EXPECT_NE(advice.back().find("run softrdma as root"), std::string::npos);
  UsernsFacts root;
  root.is_root = true;  // refused anyway: root without CAP_SYS_ADMIN
  EXPECT_NE(UsernsAdvice(root, EPERM).back().find("CAP_SYS_ADMIN"), std::string::npos);
}

}  // namespace
}  // namespace softrdma::cli
