// This process's memory map as /proc/self/maps describes it: which ranges
// are mapped, with what protection, and backed by what. Registration uses
// it to decide whether a region's pages can be moved into shared memory
// (core/memory_export.h); the fork handler uses it to find those pages again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma {

struct MapsEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  bool read = false;
  bool write = false;
  bool exec = false;
  bool shared = false;  // 's' (MAP_SHARED) rather than 'p'
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string path;  // empty for anonymous memory; "[heap]", "/memfd:name (deleted)", ...
};

// Parses the text of a maps file (exposed for tests). Malformed lines are
// skipped.
std::vector<MapsEntry> ParseMaps(std::string_view text);

// Reads and parses /proc/self/maps. Empty on failure.
std::vector<MapsEntry> ReadSelfMaps();

}  // namespace softrdma
