#include "transport/peer_mappings.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

namespace softrdma::transport {

PeerMappings::~PeerMappings() {
  for (const Dropped& d : graveyard_) munmap(d.local, d.length);
  Cached* cache = cache_ptr_.load(std::memory_order_relaxed);
  if (!cache) return;
  for (uint32_t i = 0; i < ExtentTable::kSlots; ++i)
    if (cache[i].id.load(std::memory_order_relaxed)) munmap(cache[i].local, cache[i].length);
}

uint8_t* PeerMappings::ResolveSlow(uint32_t slot, uint64_t host, uint64_t len) {
  const ExportedExtent& x = table_->slots[slot];
  const uint64_t id = x.id.load(std::memory_order_acquire);
  if (id == 0 || !Covers(x, host, len)) return nullptr;
  if (table_->retired.load(std::memory_order_acquire) !=
      seen_retired_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mutex_);
    Sweep();
  }
  Cached* cache = cache_ptr_.load(std::memory_order_acquire);
  // seq_cst: a pin taken before this load and a Drop's clear-then-check of
  // pins_ cannot both miss each other.
  if (!cache || cache[slot].id.load(std::memory_order_seq_cst) != id) {
    if (refused_.load(std::memory_order_relaxed)) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!MapSlot(slot, id)) return nullptr;
    cache = cache_ptr_.load(std::memory_order_relaxed);
  }
  return cache[slot].local + (host - x.base);
}

bool PeerMappings::MapSlot(uint32_t slot, uint64_t id) {
  if (!cache_) {
    cache_ = std::make_unique<Cached[]>(ExtentTable::kSlots);
    cache_ptr_.store(cache_.get(), std::memory_order_release);
  }
  Cached& c = cache_[slot];
  if (c.id.load(std::memory_order_relaxed) == id) return true;  // another thread did it
  if (c.id.load(std::memory_order_relaxed) != 0) {
    // The slot held an extent the peer has released since (its id differs,
    // so no MR of it can be held): drop it.
    c.id.store(0, std::memory_order_seq_cst);  // before Drop reads pins_ (see Pinned)
    Drop(c.local, c.length);
  }
  const ExportedExtent& x = table_->slots[slot];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid_), x.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EACCES || errno == EPERM) {
      SOFTRDMA_LOG(kInfo, "cannot open registered memory of pid %d (%s): not mapped",
                   static_cast<int>(pid_), strerror(errno));
      refused_.store(true, std::memory_order_relaxed);
    }
    return false;
  }
  struct stat st {};
  void* p = MAP_FAILED;
  // The descriptor number may have been reused if the extent changed since
  // we read the slot: the inode tells.
  if (fstat(fd, &st) == 0 && st.st_ino == x.inode && static_cast<uint64_t>(st.st_size) >= x.length)
    p = mmap(nullptr, x.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return false;
  c.local = static_cast<uint8_t*>(p);
  c.length = x.length;
  c.id.store(id, std::memory_order_release);
  return true;
}

void PeerMappings::Sweep() {
  const uint64_t retired = table_->retired.load(std::memory_order_acquire);
  if (cache_) {
    for (uint32_t i = 1; i < ExtentTable::kSlots; ++i) {
      Cached& c = cache_[i];
      const uint64_t id = c.id.load(std::memory_order_relaxed);
      if (id == 0 || table_->slots[i].id.load(std::memory_order_acquire) == id) continue;
      c.id.store(0, std::memory_order_seq_cst);  // before Drop reads pins_ (see Pinned)
      Drop(c.local, c.length);
    }
  }
  seen_retired_.store(retired, std::memory_order_relaxed);
}

void PeerMappings::Drop(uint8_t* local, uint64_t length) {
  // Unreachable from the cache already; a pin taken before may still use it.
  if (pins_.load(std::memory_order_seq_cst) == 0) {
    munmap(local, length);
    return;
  }
  graveyard_.push_back({local, length});
  graveyard_nonempty_.store(true, std::memory_order_release);
}

void PeerMappings::Unpin() {
  if (pins_.fetch_sub(1, std::memory_order_seq_cst) != 1 ||
      !graveyard_nonempty_.load(std::memory_order_acquire))
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Every pin that could have seen a dropped mapping was taken before it was
  // dropped (under mutex_); none is left if the count reads 0 now.
  if (pins_.load(std::memory_order_seq_cst) != 0) return;
  for (const Dropped& d : graveyard_) munmap(d.local, d.length);
  graveyard_.clear();
  graveyard_nonempty_.store(false, std::memory_order_relaxed);
}

}  // namespace softrdma::transport
