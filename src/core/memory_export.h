// Makes registered memory mappable by peer processes, so that a one-sided
// operation from another process is a plain memory copy: no system call,
// no help from this process.
//
// ibv_reg_mr moves the region's whole pages (its page-aligned interior)
// from private anonymous memory into a memfd mapped at the same addresses:
// the application sees the same bytes at the same addresses, and peers map
// the memfd through /proc/<pid>/fd. Only private, anonymous, read-write
// memory is moved (heap, malloc/mmap buffers); anything else (files, shared
// or huge-page mappings, the main stack) stays where it is and peers reach it
// with cross-memory attach or through the ring. See docs/design.md
// "Registered memory" for the consequences (fork, concurrent writes during
// ibv_reg_mr, mlock) and SOFTRDMA_MAP_MR in docs/configuration.md.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "core/exported_extent.h"

namespace softrdma {

class MemoryExporter {
 public:
  // `table` is the zeroed extent table in this process's segment.
  explicit MemoryExporter(ExtentTable* table) : table_(table) {}

  // Makes the whole pages of [addr, addr+len) mappable by peers and returns
  // the extent slot holding them (counted as one more user), or 0 when the
  // region has no whole page, its memory cannot be moved, it straddles an
  // extent made for another region, or the table is full.
  uint32_t Export(uint64_t addr, uint64_t len);
  // One user of the slot fewer; the last one frees it and turns the pages
  // back into private memory with the same bytes.
  void Release(uint32_t slot);
  // The extent in `slot` (one this process holds: its fields are stable),
  // or nullptr for slot 0.
  const ExportedExtent* Extent(uint32_t slot) const {
    return slot == 0 || slot >= ExtentTable::kSlots ? nullptr : &table_->slots[slot];
  }

  // In the child of a fork: the memfd-backed pages would be shared with the
  // parent, where real hardware gives the child a private copy. Replaces
  // every such mapping with a private copy, then forgets the extents (their
  // descriptors are closed; the slots belong to the parent's segment).
  void ForgetAfterFork();
  static void PrivatizeAfterFork();

 private:
  ExtentTable* table_;
  std::mutex mutex_;
  std::map<uint64_t, uint32_t> by_base_;  // live extents by first address
  uint64_t next_id_ = 1;
  uint32_t next_slot_ = 1;
};

}  // namespace softrdma
