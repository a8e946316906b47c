// A peer process's registered memory, mapped into this process: the
// initiator side of core/memory_export.h. With it a one-sided operation to
// that peer is a memcpy into (or out of) the mapping.
//
// Thread safety: Resolve may be called from any thread. A cached mapping is
// valid while the peer still publishes the same extent id in its slot; the
// caller holds an MR of that extent (MrTable::BeginRemoteAccess), which keeps
// the id published, so the mapping cannot be dropped under its copy.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include <sys/types.h>

#include "core/exported_extent.h"

namespace softrdma::transport {

class PeerMappings {
 public:
  PeerMappings(pid_t pid, const ExtentTable* table) : pid_(pid), table_(table) {}
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // Where [host, host+len) of the peer's memory is mapped here, if it lies in
  // the peer's extent `slot` and that extent can be mapped; nullptr otherwise
  // (the caller then uses cross-memory attach or the ring).
  uint8_t* Resolve(uint32_t slot, uint64_t host, uint64_t len);

 private:
  struct Cached {
    std::atomic<uint64_t> id{0};  // the extent's id; 0 = nothing mapped
    uint8_t* local = nullptr;
    uint64_t length = 0;
  };
  // Maps the extent in `slot` (mutex_ held). Returns false if it cannot.
  bool MapSlot(uint32_t slot, uint64_t id);
  // Unmaps cached extents the peer has released (mutex_ held).
  void Sweep();

  const pid_t pid_;
  const ExtentTable* const table_;
  std::mutex mutex_;
  std::unique_ptr<Cached[]> cache_;  // ExtentTable::kSlots entries, made on first use
  std::atomic<Cached*> cache_ptr_{nullptr};
  std::atomic<uint64_t> seen_retired_{0};
  std::atomic<bool> refused_{false};  // the peer's descriptors cannot be opened
};

}  // namespace softrdma::transport
