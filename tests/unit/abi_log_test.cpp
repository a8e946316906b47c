// The __verbs_log backend and the verbs_allow_disassociate_destroy switch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "util/verbs_env.h"
#include "util/verbs_log.h"

namespace softrdma {
namespace {

TEST(VerbsLog, ParseLevel) {
  EXPECT_EQ(parse_verbs_log_level(nullptr), kVerbsLogNone);
  EXPECT_EQ(parse_verbs_log_level(""), kVerbsLogNone);
  EXPECT_EQ(parse_verbs_log_level("0"), kVerbsLogNone);
  EXPECT_EQ(parse_verbs_log_level("1"), kVerbsLogErr);
  EXPECT_EQ(parse_verbs_log_level("2"), kVerbsLogWarn);
  EXPECT_EQ(parse_verbs_log_level("3"), kVerbsLogInfo);
  EXPECT_EQ(parse_verbs_log_level("4"), kVerbsLogDebug);
  EXPECT_EQ(parse_verbs_log_level("9"), kVerbsLogDebug);
  EXPECT_EQ(parse_verbs_log_level("99999999999999999999"), kVerbsLogDebug);
  EXPECT_EQ(parse_verbs_log_level("-1"), kVerbsLogNone);
  EXPECT_EQ(parse_verbs_log_level("debug"), kVerbsLogNone);
  EXPECT_EQ(parse_verbs_log_level("3x"), kVerbsLogNone);
}

TEST(VerbsLog, Enabled) {
  EXPECT_FALSE(verbs_log_enabled(kVerbsLogNone, kVerbsLogErr));
  EXPECT_TRUE(verbs_log_enabled(kVerbsLogErr, kVerbsLogErr));
  EXPECT_FALSE(verbs_log_enabled(kVerbsLogErr, kVerbsLogWarn));
  EXPECT_TRUE(verbs_log_enabled(kVerbsLogDebug, kVerbsLogInfo));
  EXPECT_FALSE(verbs_log_enabled(kVerbsLogDebug, kVerbsLogNone));
}

void log_to(VerbsLog& log, uint32_t level, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  log.vlog(level, fmt, args);
  va_end(args);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class VerbsLogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrdma_log_test_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(VerbsLogFileTest, WritesEnabledLevelsOnlyAndAppends) {
  {
    std::ofstream(path_) << "existing\n";
    VerbsLog log(kVerbsLogWarn, path_.c_str());
    log_to(log, kVerbsLogErr, "err %d %s\n", 1, "one");
    log_to(log, kVerbsLogWarn, "warn %s\n", "two");
    log_to(log, kVerbsLogInfo, "info must not appear\n");
    log_to(log, kVerbsLogDebug, "debug must not appear\n");
    log_to(log, kVerbsLogWarn, nullptr);  // ignored, no crash
  }
  EXPECT_EQ(slurp(path_), "existing\nerr 1 one\nwarn two\n");
}

TEST_F(VerbsLogFileTest, TruncatesLongMessages) {
  {
    VerbsLog log(kVerbsLogDebug, path_.c_str());
    const std::string big(5000, 'x');
    log_to(log, kVerbsLogErr, "%s", big.c_str());
  }
  EXPECT_EQ(slurp(path_), std::string(VerbsLog::kMaxMessage - 1, 'x'));
}

TEST_F(VerbsLogFileTest, LevelNoneDoesNotTouchTheFile) {
  std::remove(path_.c_str());
  {
    VerbsLog log(kVerbsLogNone, path_.c_str());
    log_to(log, kVerbsLogErr, "nothing\n");
  }
  EXPECT_FALSE(std::ifstream(path_).good()) << "log file created although logging is off";
}

TEST(VerbsLog, UnopenableFileFallsBackWithoutCrashing) {
  VerbsLog log(kVerbsLogErr, "/nonexistent-dir/softrdma.log");
  EXPECT_EQ(log.level(), kVerbsLogErr);
  log_to(log, kVerbsLogDebug, "filtered, never reaches stderr\n");
}

TEST(VerbsEnv, AllowDisassociateDestroy) {
  EXPECT_FALSE(allow_disassociate_destroy(nullptr, nullptr));
  // The rdma-core variable counts by presence, whatever its value.
  EXPECT_TRUE(allow_disassociate_destroy("1", nullptr));
  EXPECT_TRUE(allow_disassociate_destroy("0", nullptr));
  EXPECT_TRUE(allow_disassociate_destroy("", nullptr));
  // The legacy mlx4 variable is on unless it is exactly "0".
  EXPECT_TRUE(allow_disassociate_destroy(nullptr, "1"));
  EXPECT_TRUE(allow_disassociate_destroy(nullptr, "yes"));
  EXPECT_TRUE(allow_disassociate_destroy(nullptr, ""));
  EXPECT_TRUE(allow_disassociate_destroy(nullptr, "00"));
  EXPECT_FALSE(allow_disassociate_destroy(nullptr, "0"));
  EXPECT_TRUE(allow_disassociate_destroy("", "0"));
}

}  // namespace
}  // namespace softrdma
