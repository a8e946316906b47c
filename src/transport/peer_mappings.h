// A peer process's registered memory, mapped into this process: the
// initiator side of core/memory_export.h. With it a one-sided operation to
// that peer is a memcpy into (or out of) the mapping.
//
// Thread safety: Resolve may be called from any thread. A cached mapping is
// valid while the peer still publishes the same extent id in its slot. A
// one-sided operation holds an MR of that extent (MrTable::BeginRemoteAccess),
// which keeps the id published, so the mapping cannot be dropped under its
// copy. A SEND's pull holds nothing of the requester's: it pins the cache
// (Pinned) instead, and mappings dropped meanwhile are unmapped only when no
// pin is left (a requester that deregisters a buffer under its own SEND
// makes us read stale bytes, never crash).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

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
  // Inline for the common case (the extent is mapped and nothing was
  // released since the last look); the rest is ResolveSlow.
  [[gnu::always_inline]] uint8_t* Resolve(uint32_t slot, uint64_t host, uint64_t len) {
    if (slot == 0 || slot >= ExtentTable::kSlots) return nullptr;
    const ExportedExtent& x = table_->slots[slot];
    Cached* cache = cache_ptr_.load(std::memory_order_acquire);
    const uint64_t id = x.id.load(std::memory_order_acquire);
    // seq_cst: a pin taken before this load and a Drop's clear-then-check of
    // pins_ cannot both miss each other (a plain load on x86).
    if (cache && id != 0 && cache[slot].id.load(std::memory_order_seq_cst) == id &&
        table_->retired.load(std::memory_order_acquire) ==
            seen_retired_.load(std::memory_order_relaxed) &&
        Covers(x, host, len))
      return cache[slot].local + (host - x.base);
    return ResolveSlow(slot, host, len);
  }

  // Keeps every mapping resolved while it lives from being unmapped.
  class Pinned {
   public:
    explicit Pinned(PeerMappings* m) : m_(m) {
      if (m_) m_->pins_.fetch_add(1, std::memory_order_seq_cst);
    }
    ~Pinned() {
      if (m_) m_->Unpin();
    }
    Pinned(const Pinned&) = delete;
    Pinned& operator=(const Pinned&) = delete;

   private:
    PeerMappings* m_;
  };

 private:
  struct Cached {
    std::atomic<uint64_t> id{0};  // the extent's id; 0 = nothing mapped
    uint8_t* local = nullptr;
    uint64_t length = 0;
  };
  uint8_t* ResolveSlow(uint32_t slot, uint64_t host, uint64_t len);
  // [host, host+len) lies inside the extent.
  static bool Covers(const ExportedExtent& x, uint64_t host, uint64_t len) {
    return host >= x.base && len <= x.length && host - x.base <= x.length - len;
  }
  // Maps the extent in `slot` (mutex_ held). Returns false if it cannot.
  bool MapSlot(uint32_t slot, uint64_t id);
  // Unmaps cached extents the peer has released (mutex_ held).
  void Sweep();
  // Unmaps now, or once the last pin goes (mutex_ held).
  void Drop(uint8_t* local, uint64_t length);
  void Unpin();

  const pid_t pid_;
  const ExtentTable* const table_;
  std::mutex mutex_;
  std::unique_ptr<Cached[]> cache_;  // ExtentTable::kSlots entries, made on first use
  std::atomic<Cached*> cache_ptr_{nullptr};
  std::atomic<uint64_t> seen_retired_{0};
  std::atomic<bool> refused_{false};  // the peer's descriptors cannot be opened
  std::atomic<uint32_t> pins_{0};
  struct Dropped {
    uint8_t* local;
    uint64_t length;
  };
  std::vector<Dropped> graveyard_;  // mutex_; unmapped when pins_ is 0
  std::atomic<bool> graveyard_nonempty_{false};
};

}  // namespace softrdma::transport
