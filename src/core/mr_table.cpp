#include "core/mr_table.h"

#include <cerrno>
#include <mutex>
#include <random>
#include <thread>

#include "util/clock.h"

namespace softrdma {

namespace {

uint8_t RandomByte() {
  static thread_local std::minstd_rand rng{std::random_device{}()};
  return static_cast<uint8_t>(rng() >> 7);
}

// A key byte that differs from `previous` (so stale keys never revalidate).
uint8_t FreshKeyByte(uint8_t previous) {
  uint8_t b = RandomByte();
  return b == previous ? static_cast<uint8_t>(b + 1) : b;
}

}  // namespace

int MrTable::Add(uint32_t pd_id, uint32_t access, uint64_t iova, uint64_t length,
                 uint64_t host_addr, uint32_t* lkey, uint32_t* rkey) {
  std::lock_guard<SpinLock> lock(alloc_lock_);
  for (uint32_t tries = 0; tries < kCapacity; ++tries) {
    uint32_t index = next_index_;
    next_index_ = next_index_ + 1 == kCapacity ? 1 : next_index_ + 1;
    MrEntry& e = entries_[index];
    if (e.lkey != 0) continue;  // in use
    uint32_t seq = e.seq.load(std::memory_order_relaxed);
    e.seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    uint8_t lbyte = FreshKeyByte(static_cast<uint8_t>(e.rkey));
    uint8_t rbyte = FreshKeyByte(lbyte);
    // lkey and rkey differ in their key byte; neither is ever 0.
    e.lkey = (index << 8) | lbyte;
    e.rkey = (index << 8) | rbyte;
    e.pd_id = pd_id;
    e.access = access;
    e.iova = iova;
    e.length = length;
    e.host_addr = host_addr;
    e.seq.store(seq + 2, std::memory_order_release);
    *lkey = e.lkey;
    *rkey = e.rkey;
    return 0;
  }
  return ENOMEM;
}

void MrTable::Remove(uint32_t lkey) {
  uint32_t index = lkey >> 8;
  if (index == 0 || index >= kCapacity) return;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (e.lkey != lkey) return;
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.lkey = 0;  // keep rkey's byte: the next owner's key bytes must differ
  e.length = 0;
  e.access = 0;
  e.seq.store(seq + 2, std::memory_order_seq_cst);
  // An initiator that validated the key before the invalidation may still be
  // copying: wait for it (it increments before re-checking seq, so any
  // access not counted here has seen the new seq and gives up).
  const uint64_t deadline = NowNs() + kDrainTimeoutNs;
  while (e.inflight.load(std::memory_order_seq_cst) != 0) {
    if (NowNs() > deadline) {
      e.inflight.store(0, std::memory_order_relaxed);  // a dead initiator's count
      break;
    }
    std::this_thread::yield();
  }
}

int MrTable::BeginRemoteAccess(const MrEntry* entries, uint32_t rkey, uint64_t addr, uint64_t len,
                               uint32_t pd_id, uint32_t needed_access, uint64_t* host_addr,
                               const MrEntry** held) {
  uint32_t index = rkey >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  const MrEntry& e = entries[index];
  for (;;) {
    uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    uint32_t k = e.rkey, live = e.lkey, entry_pd = e.pd_id, access = e.access;
    uint64_t iova = e.iova, length = e.length, base = e.host_addr;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != s1) continue;
    if (live == 0 || k != rkey) return EINVAL;
    if (entry_pd != pd_id) return EACCES;
    if ((access & needed_access) != needed_access) return EACCES;
    if (addr < iova || len > length || addr - iova > length - len) return ERANGE;
    // Count ourselves in, then make sure the region was not invalidated in
    // between (deregistration invalidates first, then waits for the count).
    e.inflight.fetch_add(1, std::memory_order_seq_cst);
    if (e.seq.load(std::memory_order_seq_cst) != s1) {
      e.inflight.fetch_sub(1, std::memory_order_release);
      continue;  // changed: look again (it is most likely gone now)
    }
    *host_addr = base + (addr - iova);
    *held = &e;
    return 0;
  }
}

int MrTable::Lookup(KeyKind kind, uint32_t key, uint64_t addr, uint64_t len, uint32_t pd_id,
                    uint32_t needed_access, uint64_t* host_addr) const {
  uint32_t index = key >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  const MrEntry& e = entries_[index];
  for (;;) {
    uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    uint32_t k = kind == KeyKind::kLocal ? e.lkey : e.rkey;
    uint32_t live = e.lkey;
    uint32_t entry_pd = e.pd_id, access = e.access;
    uint64_t iova = e.iova, length = e.length, base = e.host_addr;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != s1) continue;
    if (live == 0 || k != key) return EINVAL;
    if (entry_pd != pd_id) return EACCES;
    if ((access & needed_access) != needed_access) return EACCES;
    if (addr < iova || len > length || addr - iova > length - len) return ERANGE;
    *host_addr = base + (addr - iova);
    return 0;
  }
}

}  // namespace softrdma
