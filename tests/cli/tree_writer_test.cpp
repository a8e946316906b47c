// WriteTree creates what the description says, with sysfs-like modes, and
// reports the path that fails.
#include "cli/tree_writer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace softrdma::cli {
namespace {

namespace fs = std::filesystem;

class TreeWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "softrdma-tree-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    // Files are 0444 and directories 0755: removal needs no chmod.
    fs::remove_all(root_);
  }
  std::string Read(const std::string& rel) {
    std::ifstream in(root_ + "/" + rel);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string root_;
};

TEST_F(TreeWriterTest, CreatesDirectoriesFilesAndSymlinks) {
  std::vector<TreeEntry> entries = {
      {TreeEntry::Kind::kDirectory, "a", ""},
      {TreeEntry::Kind::kDirectory, "a/b", ""},
      {TreeEntry::Kind::kFile, "a/b/value", "4: ACTIVE\n"},
      {TreeEntry::Kind::kSymlink, "a/link", "b/value"},
  };
  std::string error;
  const mode_t old_mask = umask(077);  // must not narrow the modes
  ASSERT_TRUE(WriteTree(root_, entries, &error)) << error;
  umask(old_mask);
  EXPECT_EQ(Read("a/b/value"), "4: ACTIVE\n");
  EXPECT_EQ(Read("a/link"), "4: ACTIVE\n");
  EXPECT_EQ(fs::read_symlink(root_ + "/a/link"), "b/value");
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((root_ + "/a/b/value").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
}

TEST_F(TreeWriterTest, ReportsTheFailingPath) {
  std::vector<TreeEntry> entries = {{TreeEntry::Kind::kFile, "missing/dir/file", "x\n"}};
  std::string error;
  EXPECT_FALSE(WriteTree(root_, entries, &error));
  EXPECT_NE(error.find(root_ + "/missing/dir/file"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST_F(TreeWriterTest, RefusesToOverwrite) {
  std::vector<TreeEntry> entries = {{TreeEntry::Kind::kFile, "f", "1\n"},
                                    {TreeEntry::Kind::kFile, "f", "2\n"}};
  std::string error;
  EXPECT_FALSE(WriteTree(root_, entries, &error));
  EXPECT_EQ(Read("f"), "1\n");
}

}  // namespace
}  // namespace softrdma::cli
