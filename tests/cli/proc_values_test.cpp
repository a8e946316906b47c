// The /proc readers behind the doctor's facts.
#include "cli/proc_values.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace softrdma::cli {
namespace {

TEST(ProcValues, StatusFieldReadsThisProcess) {
  EXPECT_EQ(StatusField("Pid"), std::to_string(getpid()));
  EXPECT_EQ(StatusField("NoSuchField"), "");
  // "Pid" must not match "PPid" and vice versa.
  EXPECT_EQ(StatusField("PPid"), std::to_string(getppid()));
}

TEST(ProcValues, ReadIntFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("softrdma-int-" + std::to_string(getpid())))
          .string();
  std::ofstream(path) << "15000\n";
  EXPECT_EQ(ReadIntFile(path.c_str()), 15000);
  std::ofstream(path) << "not a number\n";
  EXPECT_EQ(ReadIntFile(path.c_str()), -1);
  std::remove(path.c_str());
  EXPECT_EQ(ReadIntFile(path.c_str()), -1);
}

}  // namespace
}  // namespace softrdma::cli
