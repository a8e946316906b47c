#include "core/mr_table.h"

#include "util/seqlock.h"

#include <cerrno>
#include <initializer_list>
#include <mutex>
#include <random>
#include <thread>

#include <infiniband/verbs.h>

#include "util/clock.h"

namespace softrdma {

namespace {

uint8_t RandomByte() {
  static thread_local std::minstd_rand rng{std::random_device{}()};
  return static_cast<uint8_t>(rng() >> 7);
}

// A random key byte that differs from each of `avoid` (so that no key the
// index carried before, and not the MR's other key, can match).
uint8_t FreshKeyByte(std::initializer_list<uint8_t> avoid) {
  uint8_t b = RandomByte();
  for (bool clash = true; clash;) {
    clash = false;
    for (uint8_t a : avoid) clash |= a == b;
    if (clash) ++b;
  }
  return b;
}

}  // namespace

namespace {

// The fields that say what a region is (Add and Reregister; the caller holds
// the entry's seqlock odd).
void StoreRegion(MrEntry& e, uint32_t pd_id, uint32_t access, uint64_t iova, uint64_t length,
                 uint64_t host_addr, uint32_t extent) {
  SeqlockStore(&e.pd_id, pd_id);
  SeqlockStore(&e.access, access);
  SeqlockStore(&e.iova, iova);
  SeqlockStore(&e.length, length);
  SeqlockStore(&e.host_addr, host_addr);
  SeqlockStore(&e.extent, extent);
}

}  // namespace

int MrTable::Add(uint32_t pd_id, uint32_t access, uint64_t iova, uint64_t length,
                 uint64_t host_addr, uint32_t* lkey, uint32_t* rkey, uint32_t extent) {
  std::lock_guard<SpinLock> lock(alloc_lock_);
  for (uint32_t tries = 0; tries < kCapacity; ++tries) {
    uint32_t index = next_index_;
    next_index_ = next_index_ + 1 == kCapacity ? 1 : next_index_ + 1;
    MrEntry& e = entries_[index];
    if (e.live || e.window) continue;
    uint32_t seq = e.seq.load(std::memory_order_relaxed);
    e.seq.store(seq + 1, std::memory_order_relaxed);
    const uint8_t old_l = static_cast<uint8_t>(e.lkey), old_r = static_cast<uint8_t>(e.rkey);
    uint8_t lbyte = FreshKeyByte({old_l, old_r});
    uint8_t rbyte = FreshKeyByte({old_l, old_r, lbyte});
    // lkey and rkey differ in their key byte; neither is ever 0.
    SeqlockStore(&e.lkey, (index << 8) | lbyte);
    SeqlockStore(&e.rkey, (index << 8) | rbyte);
    StoreRegion(e, pd_id, access, iova, length, host_addr, extent);
    SeqlockStore(&e.qpn, 0u);
    e.windows = 0;
    SeqlockStore(&e.live, 1u);
    e.seq.store(seq + 2, std::memory_order_release);
    *lkey = e.lkey;
    *rkey = e.rkey;
    return 0;
  }
  return ENOMEM;
}

void MrTable::Retire(MrEntry& e) {
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  SeqlockStore(&e.live, 0u);  // keys stay: the next owner's key bytes must differ
  SeqlockStore(&e.length, uint64_t{0});
  SeqlockStore(&e.access, 0u);
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

int MrTable::Remove(uint32_t lkey) {
  uint32_t index = lkey >> 8;
  if (index == 0 || index >= kCapacity) return 0;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (!e.live || e.window || e.lkey != lkey) return 0;
  if (e.windows) return EBUSY;
  Retire(e);
  return 0;
}

int MrTable::Reregister(uint32_t lkey, uint32_t pd_id, uint32_t access, uint64_t iova,
                        uint64_t length, uint64_t host_addr, uint32_t extent) {
  uint32_t index = lkey >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (!e.live || e.window || e.lkey != lkey) return EINVAL;
  if (e.windows) return EBUSY;
  // Retired first, so no access validated against the old PD, access or
  // memory is still copying when the new ones take effect.
  Retire(e);
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  StoreRegion(e, pd_id, access, iova, length, host_addr, extent);
  SeqlockStore(&e.live, 1u);
  e.seq.store(seq + 2, std::memory_order_release);
  return 0;
}

uint32_t MrTable::ExtentOf(uint32_t lkey) const {
  uint32_t index = lkey >> 8;
  if (index == 0 || index >= kCapacity) return 0;
  return SeqlockLoad(&entries_[index].extent);
}

bool MrTable::HasWindows(uint32_t lkey) const {
  uint32_t index = lkey >> 8;
  if (index == 0 || index >= kCapacity) return false;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  const MrEntry& e = entries_[index];
  return e.live && !e.window && e.lkey == lkey && e.windows != 0;
}

MrSnapshot ReadMrEntrySlow(const MrEntry& e) {
  MrSnapshot s;
  while (!TryReadMrEntry(e, &s)) __builtin_ia32_pause();
  return s;
}

int MrTable::ResolveSgesList(const ibv_sge* sge, uint32_t num_sge, uint32_t pd_id,
                             uint32_t needed_access, iovec* out, uint64_t limit,
                             uint32_t* extents) const {
  int n = 0;
  for (uint32_t i = 0; i < num_sge && limit; ++i) {
    if (sge[i].length == 0) continue;
    uint64_t host = 0;
    if (LookupLocal(sge[i].lkey, sge[i].addr, sge[i].length, pd_id, needed_access, &host) != 0)
      return -1;
    if (extents) extents[n] = ExtentOf(sge[i].lkey);
    const uint64_t take = sge[i].length < limit ? sge[i].length : limit;
    out[n++] = iovec{reinterpret_cast<void*>(host), take};
    limit -= take;
  }
  return n;
}

int LookupLocalSlow(const MrEntry& e, uint32_t key, uint64_t addr, uint64_t len, uint32_t pd_id,
                    uint32_t needed_access, uint64_t* host_addr) {
  MrLocalSnapshot s;
  while (!TryReadMrEntryLocal(e, &s)) __builtin_ia32_pause();
  if (int rc = CheckMrLocal(s, key, addr, len, pd_id, needed_access)) return rc;
  *host_addr = s.host_addr + (addr - s.iova);
  return 0;
}

int MrTable::BeginRemoteAccessAgain(const MrEntry* entries, uint32_t rkey, uint64_t addr,
                                    uint64_t len, uint32_t pd_id, uint32_t needed_access,
                                    uint32_t qpn, uint64_t* host_addr, const MrEntry** held,
                                    uint32_t* extent) {
  return BeginRemoteAccess(entries, rkey, addr, len, pd_id, needed_access, qpn, host_addr, held,
                           extent);
}

// ---------------------------------------------------------------- windows

int MrTable::AddWindow(uint32_t pd_id, uint32_t type, uint32_t* rkey) {
  std::lock_guard<SpinLock> lock(alloc_lock_);
  for (uint32_t tries = 0; tries < kCapacity; ++tries) {
    uint32_t index = next_index_;
    next_index_ = next_index_ + 1 == kCapacity ? 1 : next_index_ + 1;
    MrEntry& e = entries_[index];
    if (e.live || e.window) continue;
    uint32_t seq = e.seq.load(std::memory_order_relaxed);
    e.seq.store(seq + 1, std::memory_order_relaxed);
    // Unbound: live stays 0, so the key opens nothing until a bind.
    uint8_t rbyte = FreshKeyByte({static_cast<uint8_t>(e.lkey), static_cast<uint8_t>(e.rkey)});
    SeqlockStore(&e.rkey, (index << 8) | rbyte);
    SeqlockStore(&e.pd_id, pd_id);
    SeqlockStore(&e.window, type);
    SeqlockStore(&e.qpn, 0u);
    if (type == 2) ++type2_windows_;
    e.parent = 0;
    e.seq.store(seq + 2, std::memory_order_release);
    *rkey = e.rkey;
    return 0;
  }
  return ENOMEM;
}

void MrTable::Unbind(MrEntry& e) {
  if (!e.live) return;
  Retire(e);
  if (e.parent) --entries_[e.parent].windows;
  e.parent = 0;
}

void MrTable::RemoveWindow(uint32_t rkey) {
  uint32_t index = rkey >> 8;
  if (index == 0 || index >= kCapacity) return;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (!e.window) return;
  Unbind(e);
  if (e.window == 2) --type2_windows_;
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  SeqlockStore(&e.window, 0u);
  e.seq.store(seq + 2, std::memory_order_release);
}

int MrTable::BindWindow(const WindowBind& b) {
  uint32_t index = b.new_rkey >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (!e.window || e.pd_id != b.pd_id) return EINVAL;
  // A type 2 window is bound once, then invalidated before the next bind.
  if (e.window == 2 && (e.live || b.length == 0)) return EINVAL;
  uint32_t parent = 0;
  if (b.length) {
    parent = b.mr_lkey >> 8;
    if (parent == 0 || parent >= kCapacity) return EINVAL;
    const MrEntry& p = entries_[parent];
    if (!p.live || p.window || p.lkey != b.mr_lkey || p.pd_id != b.pd_id) return EINVAL;
    if (!(p.access & IBV_ACCESS_MW_BIND)) return EACCES;
    // Remote write/atomic through the window needs a locally writable MR.
    if ((b.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(p.access & IBV_ACCESS_LOCAL_WRITE))
      return EACCES;
    if (b.addr < p.iova || b.length > p.length || b.addr - p.iova > p.length - b.length)
      return ERANGE;
  }
  Unbind(e);  // a type 1 window's previous binding dies first
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  SeqlockStore(&e.rkey, b.new_rkey);
  if (parent) {
    const MrEntry& p = entries_[parent];
    SeqlockStore(&e.access, b.access);
    SeqlockStore(&e.iova, b.zero_based ? uint64_t{0} : b.addr);
    SeqlockStore(&e.length, b.length);
    SeqlockStore(&e.host_addr, p.host_addr + (b.addr - p.iova));
    SeqlockStore(&e.qpn, e.window == 2 ? b.qpn : 0u);
    SeqlockStore(&e.extent, p.extent);
    e.parent = parent;
    ++entries_[parent].windows;
    SeqlockStore(&e.live, 1u);
  }
  e.seq.store(seq + 2, std::memory_order_release);
  return 0;
}

int MrTable::Invalidate(uint32_t rkey, uint32_t pd_id, uint32_t qpn) {
  uint32_t index = rkey >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  std::lock_guard<SpinLock> lock(alloc_lock_);
  MrEntry& e = entries_[index];
  if (!e.live || e.rkey != rkey || e.window != 2) return EINVAL;
  if (e.pd_id != pd_id || (qpn && e.qpn != qpn)) return EACCES;
  Unbind(e);
  return 0;
}

void MrTable::UnbindQpWindows(uint32_t qpn) {
  std::lock_guard<SpinLock> lock(alloc_lock_);
  if (type2_windows_ == 0) return;
  for (uint32_t i = 1; i < kCapacity; ++i) {
    MrEntry& e = entries_[i];
    if (e.window == 2 && e.live && e.qpn == qpn) Unbind(e);
  }
}

}  // namespace softrdma
