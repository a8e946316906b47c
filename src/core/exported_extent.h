// The shared-memory layout through which a process lets its peers map its
// registered memory (core/memory_export.h makes the extents, the peers'
// transport/peer_mappings.h maps them). It lives in the owner's segment,
// after the MR table; an MR entry names the extent holding its pages.
//
// Lifetime: a slot's fields are written before its `id` is published and
// are not changed while any MR refers to the extent; a peer reads them only
// while it holds such an MR (MrTable::BeginRemoteAccess), so they are stable
// under it. When the last MR goes, `id` becomes 0 and `retired` is bumped:
// peers then drop their mappings of extents whose id they no longer see.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace softrdma {

struct ExportedExtent {
  std::atomic<uint64_t> id;  // unique per owner process; 0 = free slot
  uint64_t inode;            // of the memfd: a peer checks what it opened
  uint64_t base;             // first byte in the owner's address space (page aligned)
  uint64_t length;           // bytes (whole pages)
  int32_t fd;                // the owner's descriptor: peers open /proc/<pid>/fd/<fd>
  uint32_t refs;             // MRs using the extent (owner only)
};

struct ExtentTable {
  static constexpr uint32_t kSlots = 4096;  // slot 0 is never used: 0 = "no extent"
  std::atomic<uint64_t> retired;            // bumped whenever an extent goes away
  uint8_t pad[56];
  ExportedExtent slots[kSlots];
};

}  // namespace softrdma
