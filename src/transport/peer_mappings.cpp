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
  Cached* cache = cache_ptr_.load(std::memory_order_relaxed);
  if (!cache) return;
  for (uint32_t i = 0; i < ExtentTable::kSlots; ++i)
    if (cache[i].id.load(std::memory_order_relaxed)) munmap(cache[i].local, cache[i].length);
}

uint8_t* PeerMappings::Resolve(uint32_t slot, uint64_t host, uint64_t len) {
  if (slot == 0 || slot >= ExtentTable::kSlots) return nullptr;
  const ExportedExtent& x = table_->slots[slot];
  const uint64_t id = x.id.load(std::memory_order_acquire);
  if (id == 0 || host < x.base || len > x.length || host - x.base > x.length - len) return nullptr;
  if (table_->retired.load(std::memory_order_acquire) !=
      seen_retired_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(mutex_);
    Sweep();
  }
  Cached* cache = cache_ptr_.load(std::memory_order_acquire);
  if (!cache || cache[slot].id.load(std::memory_order_acquire) != id) {
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
    c.id.store(0, std::memory_order_relaxed);
    munmap(c.local, c.length);
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
      c.id.store(0, std::memory_order_release);
      munmap(c.local, c.length);
    }
  }
  seen_retired_.store(retired, std::memory_order_relaxed);
}

}  // namespace softrdma::transport
