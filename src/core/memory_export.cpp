#include "core/memory_export.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "util/proc_maps.h"

namespace softrdma {

namespace {

// The memfd's name; /proc/<pid>/maps shows it as "/memfd:softrdma-mr (deleted)".
constexpr char kMemfdName[] = "softrdma-mr";
constexpr char kMapsPrefix[] = "/memfd:softrdma-mr";

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool IsOurMemfd(const MapsEntry& e) {
  return e.path.rfind(kMapsPrefix, 0) == 0;
}

// Moves the mapping [from, from+n) over [to, to+n) (mremap with
// MREMAP_FIXED) by the system call itself, not libc's mremap: memory hooks
// interpose that symbol in every loaded library, ours included, and some
// forward only its first four arguments (UCX 1.13's UCM does), so that the
// kernel got a stray register for `to`: EINVAL, or the pages moved to
// wherever it pointed. The move replaces pages by the same bytes, so no
// hook has anything to learn from it.
bool MovePages(void* from, uint64_t n, void* to) {
  return syscall(SYS_mremap, from, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, to) != -1;
}

// Memory whose pages may be moved: private anonymous read-write memory.
// (Pages of a live extent are handled before this; released ones are
// private again.)
bool Movable(const MapsEntry& e) {
  if (!e.read || !e.write || e.exec || e.shared) return false;
  return e.path.empty() || e.path == "[heap]";
}

// True if every byte of [a, b) lies in movable mappings.
bool RangeMovable(uint64_t a, uint64_t b) {
  uint64_t covered = a;
  for (const MapsEntry& e : ReadSelfMaps()) {
    if (e.end <= covered) continue;
    if (e.start > covered || !Movable(e)) return false;
    covered = e.end;
    if (covered >= b) return true;
  }
  return false;
}

// Page copies read whatever the pages hold: at deregistration that may be
// memory the application has already freed (legal: the MR is still
// registered), which AddressSanitizer and ThreadSanitizer would report. So
// under either these two helpers copy word by word without instrumentation
// (memcpy itself is intercepted); otherwise memcpy.
#if defined(__SANITIZE_ADDRESS__)
#define SOFTRDMA_RAW_MEMORY __attribute__((no_sanitize("address"), noinline))
#define SOFTRDMA_RAW_COPY 1
#elif defined(__SANITIZE_THREAD__)
#define SOFTRDMA_RAW_MEMORY __attribute__((no_sanitize("thread"), noinline))
#define SOFTRDMA_RAW_COPY 1
#else
#define SOFTRDMA_RAW_MEMORY
#define SOFTRDMA_RAW_COPY 0
#endif

SOFTRDMA_RAW_MEMORY bool AllZero(const uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i < n; i += 8) {
    uint64_t v;
    __builtin_memcpy(&v, p + i, 8);
    if (v) return false;
  }
  return true;
}

SOFTRDMA_RAW_MEMORY void CopyPage(const uint8_t* src, uint8_t* dst, uint64_t n) {
#if SOFTRDMA_RAW_COPY
  auto* d = reinterpret_cast<volatile uint64_t*>(dst);
  for (uint64_t i = 0; i < n / 8; ++i) {
    uint64_t v;
    __builtin_memcpy(&v, src + i * 8, 8);
    d[i] = v;
  }
#else
  memcpy(dst, src, n);
#endif
}

// Copies n bytes (whole pages) from src to dst, skipping pages that were
// never touched: they read as zero, and so does the fresh memfd, so copying
// them would only allocate memory for nothing.
void CopyPages(const uint8_t* src, uint8_t* dst, uint64_t n) {
  const uint64_t page = PageSize();
  constexpr uint64_t kChunkPages = 1024;
  unsigned char resident[kChunkPages];
  for (uint64_t off = 0; off < n; off += kChunkPages * page) {
    const uint64_t bytes = std::min(n - off, kChunkPages * page);
    const bool known = mincore(const_cast<uint8_t*>(src + off), bytes, resident) == 0;
    for (uint64_t p = 0; p < bytes; p += page) {
      const uint8_t* s = src + off + p;
      // A page not resident may still hold data (swapped out): look at it.
      if ((known && (resident[p / page] & 1)) || !AllZero(s, page))
        CopyPage(s, dst + off + p, page);
    }
  }
}

}  // namespace

uint32_t MemoryExporter::Export(uint64_t addr, uint64_t len) {
  const uint64_t page = PageSize();
  const uint64_t a = (addr + page - 1) & ~(page - 1);
  const uint64_t b = (addr + len) & ~(page - 1);
  if (addr + len < addr || b <= a) return 0;
  std::lock_guard<std::mutex> lock(mutex_);

  // Inside an extent made earlier (the same buffer registered again, or a
  // neighbour in the same pages): share it. Straddling one: leave it be.
  auto next = by_base_.upper_bound(a);
  if (next != by_base_.begin()) {
    const uint32_t slot = std::prev(next)->second;
    ExportedExtent& x = table_->slots[slot];
    if (a < x.base + x.length) {
      if (b > x.base + x.length) return 0;
      ++x.refs;
      return slot;
    }
  }
  if (next != by_base_.end() && next->first < b) return 0;
  if (!RangeMovable(a, b)) return 0;

  uint32_t slot = 0;
  for (uint32_t tries = 0; tries < ExtentTable::kSlots && !slot; ++tries) {
    uint32_t s = next_slot_;
    next_slot_ = next_slot_ + 1 == ExtentTable::kSlots ? 1 : next_slot_ + 1;
    if (table_->slots[s].id.load(std::memory_order_relaxed) == 0) slot = s;
  }
  if (!slot) return 0;

  const uint64_t n = b - a;
  int fd = memfd_create(kMemfdName, MFD_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st {};
  void* staging = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(n)) == 0 && fstat(fd, &st) == 0)
    staging = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (staging == MAP_FAILED) {
    close(fd);
    return 0;
  }
  CopyPages(reinterpret_cast<const uint8_t*>(a), static_cast<uint8_t*>(staging), n);
  // The same bytes, now in the memfd, replace the private pages in place:
  // the staging mapping moves over them in one step. (A store another thread
  // makes to these pages between the copy and the move is lost:
  // docs/design.md "Registered memory".)
  if (!MovePages(staging, n, reinterpret_cast<void*>(a))) {
    SOFTRDMA_LOG(kWarn, "cannot move registered pages at %#lx into shared memory: %s",
                 static_cast<unsigned long>(a), strerror(errno));
    munmap(staging, n);
    close(fd);
    return 0;
  }

  ExportedExtent& x = table_->slots[slot];
  x.inode = st.st_ino;
  x.base = a;
  x.length = n;
  x.fd = fd;
  x.refs = 1;
  x.id.store(next_id_++, std::memory_order_release);
  by_base_[a] = slot;
  return slot;
}

namespace {

// Replaces [start, start+n) — currently a mapping of one of our memfds — by
// private anonymous memory with the same bytes and protection, so that
// what the application does with the memory afterwards (free it, let malloc
// reuse it, fork) stays private to it.
bool MakePrivate(const MapsEntry& e, uint64_t start, uint64_t n) {
  auto* at = reinterpret_cast<uint8_t*>(start);
  void* copy = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return false;
  if (!e.read) mprotect(at, n, PROT_READ);
  CopyPages(at, static_cast<uint8_t*>(copy), n);
  const int prot = (e.read ? PROT_READ : 0) | (e.write ? PROT_WRITE : 0) | (e.exec ? PROT_EXEC : 0);
  mprotect(copy, n, prot);
  if (!MovePages(copy, n, at)) {
    munmap(copy, n);
    return false;
  }
  return true;
}

}  // namespace

void MemoryExporter::Release(uint32_t slot) {
  if (slot == 0 || slot >= ExtentTable::kSlots) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ExportedExtent& x = table_->slots[slot];
  if (x.id.load(std::memory_order_relaxed) == 0 || --x.refs != 0) return;
  by_base_.erase(x.base);
  x.id.store(0, std::memory_order_release);
  table_->retired.fetch_add(1, std::memory_order_release);
  // Back to private memory: once deregistered, the pages may be freed and
  // reused by malloc for anything, and such memory must not stay shared
  // (with peers' stale mappings, or with a forked child before its fork
  // handler runs). Only what is still mapped from this memfd is restored:
  // the application may have unmapped part of it.
  const uint64_t end = x.base + x.length;
  for (const MapsEntry& e : ReadSelfMaps()) {
    if (e.inode != x.inode || !IsOurMemfd(e) || e.end <= x.base || e.start >= end) continue;
    const uint64_t from = std::max(e.start, x.base), to = std::min(e.end, end);
    if (!MakePrivate(e, from, to - from))
      SOFTRDMA_LOG(kWarn, "cannot return deregistered pages at %#lx to private memory: %s",
                   static_cast<unsigned long>(from), strerror(errno));
  }
  // Peers drop their mappings when they notice `retired`.
  close(x.fd);
  x.fd = -1;
}

void MemoryExporter::ForgetAfterFork() {
  // The slots are the parent's (its segment is shared with us): leave them.
  for (auto& [base, slot] : by_base_) close(table_->slots[slot].fd);
  by_base_.clear();
}

void MemoryExporter::PrivatizeAfterFork() {
  // Only registered regions are shared at this point (deregistration makes
  // pages private again), and their whole pages hold nothing but the
  // application's buffers: the heap allocations here cannot land in them.
  for (const MapsEntry& e : ReadSelfMaps()) {
    if (IsOurMemfd(e) && !MakePrivate(e, e.start, e.end - e.start))
      SOFTRDMA_LOG(kError, "fork: cannot give the child its own copy of registered memory");
  }
}

}  // namespace softrdma
