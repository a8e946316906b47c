// File helpers behind ibv_get_sysfs_path and ibv_read_sysfs_file.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "util/sysfs_file.h"

namespace softrdma {
namespace {

class SysfsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrdma_sysfs_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  std::string dir_;
};

TEST_F(SysfsFileTest, StripsOneTrailingNewline) {
  char buf[32];
  EXPECT_EQ(read_small_file(write("board_id", "SOFT0001\n").c_str(), buf, sizeof(buf)), 8);
  EXPECT_STREQ(buf, "SOFT0001");
  // Only the final newline goes: what remains is the attribute's content.
  EXPECT_EQ(read_small_file(write("two", "a\n\n").c_str(), buf, sizeof(buf)), 2);
  EXPECT_STREQ(buf, "a\n");
}

TEST_F(SysfsFileTest, TextWithoutNewlineAndEmptyFile) {
  char buf[32];
  EXPECT_EQ(read_small_file(write("plain", "42").c_str(), buf, sizeof(buf)), 2);
  EXPECT_STREQ(buf, "42");
  buf[0] = 'x';
  EXPECT_EQ(read_small_file(write("empty", "").c_str(), buf, sizeof(buf)), 0);
  EXPECT_STREQ(buf, "");
}

TEST_F(SysfsFileTest, ExactFitAndOverflow) {
  char buf[4];
  // "abc\n" fills the buffer; the newline's byte becomes the terminator.
  EXPECT_EQ(read_small_file(write("fit", "abc\n").c_str(), buf, sizeof(buf)), 3);
  EXPECT_STREQ(buf, "abc");
  // "abcd" leaves no room for the terminator, "abcde\n" does not fit at all.
  errno = 0;
  EXPECT_EQ(read_small_file(write("full", "abcd").c_str(), buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, EOVERFLOW);
  errno = 0;
  EXPECT_EQ(read_small_file(write("long", "abcde\n").c_str(), buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, EOVERFLOW);
}

TEST_F(SysfsFileTest, Errors) {
  char buf[8];
  errno = 0;
  EXPECT_EQ(read_small_file((dir_ + "/missing").c_str(), buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(read_small_file(nullptr, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(read_small_file(write("x", "1").c_str(), nullptr, 8), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(read_small_file(write("y", "1").c_str(), buf, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(read_small_file(dir_.c_str(), buf, sizeof(buf)), -1);  // a directory
  EXPECT_EQ(errno, EISDIR);
}

TEST(SysfsPath, JoinPath) {
  EXPECT_EQ(join_path("/sys/class/infiniband/softrdma0", "board_id"),
            "/sys/class/infiniband/softrdma0/board_id");
  EXPECT_EQ(join_path("/sys/", "class"), "/sys/class");
  EXPECT_EQ(join_path("", "file"), "/file");
}

TEST(SysfsPath, RootFromEnvironment) {
  EXPECT_EQ(sysfs_root_from_env(nullptr), "/sys");
  EXPECT_EQ(sysfs_root_from_env(""), "/sys");
  EXPECT_EQ(sysfs_root_from_env("/tmp/fakesys"), "/tmp/fakesys");
  EXPECT_EQ(sysfs_root_from_env("/tmp/fakesys///"), "/tmp/fakesys");
  EXPECT_EQ(sysfs_root_from_env("/"), "/");
  EXPECT_EQ(sysfs_root_from_env("///"), "/");
}

}  // namespace
}  // namespace softrdma
