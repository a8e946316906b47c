#include "cli/proc_values.h"

#include <fstream>

namespace softrdma::cli {

int ReadIntFile(const char* path) {
  std::ifstream in(path);
  int value = -1;
  return (in >> value) ? value : -1;
}

std::string StatusField(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      const auto start = line.find_first_not_of(" \t", name.size() + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

}  // namespace softrdma::cli
