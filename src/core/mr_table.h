// The memory-region table of one process. It lives in the process's shared
// segment so that peers on the host can later validate rkeys and reach the
// memory (one-sided operations); locally it turns lkeys into addresses.
//
// Keys: index (16 bits) << 8 | key byte. The lkey and the rkey of one MR
// carry different random key bytes, and a reused index always gets a key
// byte different from its previous one, so a stale key never matches the
// new region. Indices are handed out round-robin, so a stale key only has a
// chance to collide after all 65535 slots were reused in between.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "util/seqlock.h"
#include "util/spinlock.h"

namespace softrdma {

struct MrEntry {
  // Even = stable, odd = being changed (a seqlock for readers in other
  // processes).
  std::atomic<uint32_t> seq;
  // The keys stay after deregistration (live = 0) so that the next
  // registration at this index can pick key bytes that differ from them.
  uint32_t lkey;
  uint32_t rkey;
  uint32_t pd_id;
  uint32_t access;  // IBV_ACCESS_* flags
  uint32_t live;    // 1 = registered
  // One-sided accesses in flight from initiators in any process (they
  // increment it, then re-check `seq`); deregistration waits for zero.
  mutable std::atomic<uint32_t> inflight;
  uint64_t iova;  // start of the region in key address space
  uint64_t length;
  uint64_t host_addr;  // start of the region in the owner's address space
  // --- memory windows (core/mw.h): a window is an entry of the same table,
  // so a remote access validates its rkey exactly like an MR's.
  uint32_t window;   // 0 = MR (or free); 1 / 2 = allocated window of that type
  uint32_t qpn;      // type 2 window: the only QP it can be accessed through
  uint32_t parent;   // bound window: index of its MR (owner only)
  uint32_t windows;  // MR: windows bound to it; deregistration waits for 0 (owner only)
  // The ExtentTable slot whose memfd holds the region's whole pages (peers
  // map it: core/memory_export.h); 0 = not mappable. A window inherits its MR's.
  uint32_t extent;
};

// What binding a window asks for (transport/invalidate.cpp fills it).
struct WindowBind {
  uint32_t new_rkey;  // same index as the window, new key byte
  uint32_t mr_lkey;   // 0 with length 0: unbind (type 1)
  uint64_t addr;
  uint64_t length;
  uint32_t access;  // IBV_ACCESS_REMOTE_* of the window
  uint32_t pd_id;   // the binding QP's PD (= the window's and the MR's)
  uint32_t qpn;     // type 2: the binding QP
  // IBV_ACCESS_ZERO_BASED: remote addresses are offsets into the window
  // (its iova is 0) rather than the MR's addresses.
  bool zero_based;
};

// What a successful lookup gives: where the bytes are.
struct MrHit {
  uint64_t host_addr;
  uint32_t pd_id;
  uint32_t access;
};

enum class KeyKind { kLocal, kRemote };

class MrTable {
 public:
  static constexpr uint32_t kCapacity = 1u << 16;
  static size_t Bytes() { return sizeof(MrEntry) * kCapacity; }

  // `entries` points at zeroed (or previously formatted) shared memory.
  explicit MrTable(MrEntry* entries) : entries_(entries) {}

  // Returns 0 and the keys, or ENOMEM when the table is full.
  // `extent`: the region's exported extent slot (0 = none).
  int Add(uint32_t pd_id, uint32_t access, uint64_t iova, uint64_t length, uint64_t host_addr,
          uint32_t* lkey, uint32_t* rkey, uint32_t extent = 0);
  // Invalidates the region, then waits until no initiator is accessing it
  // (at most kDrainTimeoutNs: see RemoteAccess). EBUSY while windows are
  // bound to it (they point into its memory).
  int Remove(uint32_t lkey);
  bool HasWindows(uint32_t lkey) const;
  // ibv_rereg_mr: the region of `lkey` takes the new PD, access and
  // translation under the same keys (as rxe and mlx5 keep them), after the
  // accesses in flight to the old one are done. EINVAL for an unknown key,
  // EBUSY while windows are bound to it.
  int Reregister(uint32_t lkey, uint32_t pd_id, uint32_t access, uint64_t iova, uint64_t length,
                 uint64_t host_addr, uint32_t extent);
  // The exported extent of the MR with this (valid, owner-side) lkey.
  uint32_t ExtentOf(uint32_t lkey) const;

  // --- memory windows (implemented in mr_table.cpp, used by core/verbs_mw.cpp
  // and transport/invalidate.cpp). Returns 0 or an errno-ish reason.
  // A new, unbound window of `type` (1 or 2); *rkey names its index.
  int AddWindow(uint32_t pd_id, uint32_t type, uint32_t* rkey);
  // Unbinds (waiting for accesses in flight) and frees the entry.
  void RemoveWindow(uint32_t rkey);
  // Binds (or, type 1 with length 0, unbinds) the window named by b.new_rkey's index.
  int BindWindow(const WindowBind& b);
  // Invalidates a bound type 2 window's rkey (the only keys that can be
  // invalidated: ibv_reg_mr regions and type 1 windows cannot, as in rxe).
  // qpn != 0 (SEND with Invalidate): the window must be bound to that QP.
  int Invalidate(uint32_t rkey, uint32_t pd_id, uint32_t qpn);
  // Unbinds every type 2 window bound to `qpn` (the QP is being destroyed:
  // its number may be handed out again, and the windows must not open to
  // whoever gets it).
  void UnbindQpWindows(uint32_t qpn);

  // Validates [addr, addr+len) against the key's region, its PD and the
  // access it needs (0 for a local read). Returns 0 or the errno-ish reason:
  // EINVAL = unknown key, EACCES = access/PD violation, ERANGE = out of bounds.
  // A type 2 window's rkey is valid only through the QP it is bound to
  // (`qpn`, the target QP of a remote access).
  int Lookup(KeyKind kind, uint32_t key, uint64_t addr, uint64_t len, uint32_t pd_id,
             uint32_t needed_access, uint64_t* host_addr, uint32_t qpn = 0) const;
  // Lookup(KeyKind::kLocal, ...) for this process's own keys (lkeys): the
  // same answers, with fewer loads (the hot path of every post and receive).
  int LookupLocal(uint32_t key, uint64_t addr, uint64_t len, uint32_t pd_id, uint32_t needed_access,
                  uint64_t* host_addr) const;

  // An SGE list of this process as iovecs: each non-empty SGE checked by
  // Lookup (lkey, bounds, `pd_id`, `needed_access`). Stops once `limit` bytes
  // are covered (the last iovec cut short). `extents` (optional) receives
  // each iovec's exported extent slot. Returns the iovec count, or -1 for an
  // SGE that fails its check. Every path that turns SGEs into memory (send,
  // receive, one-sided) goes through here.
  int ResolveSges(const ibv_sge* sge, uint32_t num_sge, uint32_t pd_id, uint32_t needed_access,
                  iovec* out, uint64_t limit = UINT64_MAX, uint32_t* extents = nullptr) const;

  // ResolveSges beyond its one-SGE case (out of line: the loop's registers
  // would otherwise be saved and restored around the common case too).
  int ResolveSgesList(const ibv_sge* sge, uint32_t num_sge, uint32_t pd_id, uint32_t needed_access,
                      iovec* out, uint64_t limit, uint32_t* extents) const;

  // How long deregistration waits for accesses in flight. The counter does
  // not record who holds it, so an initiator killed between increment and
  // decrement leaves it raised; the timeout bounds the wait instead (an
  // access never lasts that long: it is one process_vm_* call).
  static constexpr uint64_t kDrainTimeoutNs = 1000000000;  // 1 s

  // Initiator side of a one-sided access to another process's table
  // (`entries` is its published copy): validates the rkey like Lookup and,
  // on success, counts the access in flight; the caller must call
  // EndRemoteAccess(*held) when the bytes have moved.
  // `qpn` is the target QP (type 2 windows are bound to one). *extent (if
  // given) receives the region's exported extent slot (0 = none).
  static int BeginRemoteAccess(const MrEntry* entries, uint32_t rkey, uint64_t addr, uint64_t len,
                               uint32_t pd_id, uint32_t needed_access, uint32_t qpn,
                               uint64_t* host_addr, const MrEntry** held,
                               uint32_t* extent = nullptr);
  // The table itself (for BeginRemoteAccess by the owner's responder, which
  // must hold the region against deregistration while it copies).
  const MrEntry* entries() const { return entries_; }
  // BeginRemoteAccess after the entry changed under it (out of line).
  static int BeginRemoteAccessAgain(const MrEntry* entries, uint32_t rkey, uint64_t addr,
                                    uint64_t len, uint32_t pd_id, uint32_t needed_access,
                                    uint32_t qpn, uint64_t* host_addr, const MrEntry** held,
                                    uint32_t* extent);
  static void EndRemoteAccess(const MrEntry& held) {
    held.inflight.fetch_sub(1, std::memory_order_release);
  }

 private:
  // Marks the entry dead for readers, then waits for accesses in flight.
  static void Retire(MrEntry& e);
  // A bound window's unbinding: Retire plus its MR's count (alloc_lock_ held).
  void Unbind(MrEntry& e);

  MrEntry* entries_;
  mutable SpinLock alloc_lock_;  // HasWindows (const) takes it too
  uint32_t next_index_ = 1;
  uint32_t type2_windows_ = 0;  // allocated type 2 windows: skip the scan when 0
};

// The lookups run on every posted WR and every one-sided access: inline,
// and straight-line (one seqlock read attempt; a retry goes out of line), so
// that the compiler keeps the entry's fields in registers.

// A consistent copy of the fields a key check needs.
struct MrSnapshot {
  uint32_t seq, lkey, rkey, pd_id, access, live, window, qpn, extent;
  uint64_t iova, length, host_addr;
};

// One attempt at a seqlock read; false = the entry was being changed.
[[gnu::always_inline]] inline bool TryReadMrEntry(const MrEntry& e, MrSnapshot* s) {
  s->seq = e.seq.load(std::memory_order_acquire);
  s->lkey = SeqlockLoad(&e.lkey);
  s->rkey = SeqlockLoad(&e.rkey);
  s->live = SeqlockLoad(&e.live);
  s->pd_id = SeqlockLoad(&e.pd_id);
  s->access = SeqlockLoad(&e.access);
  s->iova = SeqlockLoad(&e.iova);
  s->length = SeqlockLoad(&e.length);
  s->host_addr = SeqlockLoad(&e.host_addr);
  s->window = SeqlockLoad(&e.window);
  s->qpn = SeqlockLoad(&e.qpn);
  s->extent = SeqlockLoad(&e.extent);
  return !(s->seq & 1) && e.seq.load(std::memory_order_relaxed) == s->seq;
}
// Retries until the read is consistent (mr_table.cpp).
MrSnapshot ReadMrEntrySlow(const MrEntry& e);
[[gnu::always_inline]] inline void ReadMrEntry(const MrEntry& e, MrSnapshot* s) {
  if (!TryReadMrEntry(e, s)) [[unlikely]]
    *s = ReadMrEntrySlow(e);
}

// The checks of an rkey (Lookup with KeyKind::kRemote, BeginRemoteAccess) on
// a snapshot; lkeys are checked by CheckMrLocal.
[[gnu::always_inline]] inline int CheckMrRemote(const MrSnapshot& s, uint32_t key, uint64_t addr,
                                                uint64_t len, uint32_t pd_id,
                                                uint32_t needed_access, uint32_t qpn) {
  if (s.live == 0 || s.rkey != key) return EINVAL;
  if (s.pd_id != pd_id) return EACCES;
  if (s.window == 2 && s.qpn != qpn) return EACCES;  // type 2: only through its QP
  if ((s.access & needed_access) != needed_access) return EACCES;
  if (addr < s.iova || len > s.length || addr - s.iova > s.length - len) return ERANGE;
  return 0;
}

[[gnu::always_inline]] inline int MrTable::BeginRemoteAccess(const MrEntry* entries, uint32_t rkey,
                                                             uint64_t addr, uint64_t len,
                                                             uint32_t pd_id, uint32_t needed_access,
                                                             uint32_t qpn, uint64_t* host_addr,
                                                             const MrEntry** held,
                                                             uint32_t* extent) {
  uint32_t index = rkey >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  const MrEntry& e = entries[index];
  MrSnapshot s;
  ReadMrEntry(e, &s);
  if (int rc = CheckMrRemote(s, rkey, addr, len, pd_id, needed_access, qpn)) return rc;
  // Count ourselves in, then make sure the region was not invalidated in
  // between (deregistration invalidates first, then waits for the count).
  e.inflight.fetch_add(1, std::memory_order_seq_cst);
  if (e.seq.load(std::memory_order_seq_cst) != s.seq) [[unlikely]] {
    e.inflight.fetch_sub(1, std::memory_order_release);
    // Changed: look again (it is most likely gone now).
    return BeginRemoteAccessAgain(entries, rkey, addr, len, pd_id, needed_access, qpn, host_addr,
                                  held, extent);
  }
  *host_addr = s.host_addr + (addr - s.iova);
  *held = &e;
  if (extent) *extent = s.extent;
  return 0;
}

// What an lkey check needs: the owner's own lookups skip the fields that
// only matter to remote accesses (rkey, QP of a type 2 window, extent).
struct MrLocalSnapshot {
  uint32_t seq, lkey, pd_id, access, live, window;
  uint64_t iova, length, host_addr;
};

[[gnu::always_inline]] inline bool TryReadMrEntryLocal(const MrEntry& e, MrLocalSnapshot* s) {
  s->seq = e.seq.load(std::memory_order_acquire);
  s->lkey = SeqlockLoad(&e.lkey);
  s->live = SeqlockLoad(&e.live);
  s->window = SeqlockLoad(&e.window);
  s->pd_id = SeqlockLoad(&e.pd_id);
  s->access = SeqlockLoad(&e.access);
  s->iova = SeqlockLoad(&e.iova);
  s->length = SeqlockLoad(&e.length);
  s->host_addr = SeqlockLoad(&e.host_addr);
  return !(s->seq & 1) && e.seq.load(std::memory_order_relaxed) == s->seq;
}

// Out of line: the entry was being changed (retries until consistent).
int LookupLocalSlow(const MrEntry& e, uint32_t key, uint64_t addr, uint64_t len, uint32_t pd_id,
                    uint32_t needed_access, uint64_t* host_addr);

// Lookup(KeyKind::kLocal, ...): the same errors as an rkey's check
// (CheckMrRemote), in the same order; a window has no lkey (its lkey field is
// a former MR's, kept for key freshness). Still a seqlock read: another
// thread of this process may deregister the region meanwhile, and a torn
// read could otherwise pair the old key with the new region's address.
[[gnu::always_inline]] inline int CheckMrLocal(const MrLocalSnapshot& s, uint32_t key,
                                               uint64_t addr, uint64_t len, uint32_t pd_id,
                                               uint32_t needed_access) {
  if ((s.live == 0) | (s.lkey != key) | (s.window != 0)) return EINVAL;
  if ((s.pd_id != pd_id) | ((s.access & needed_access) != needed_access)) return EACCES;
  // Evaluated whole, then one branch (every lookup passes).
  if ((addr < s.iova) | (len > s.length) | (addr - s.iova > s.length - len)) return ERANGE;
  return 0;
}

[[gnu::always_inline]] inline int MrTable::LookupLocal(uint32_t key, uint64_t addr, uint64_t len,
                                                       uint32_t pd_id, uint32_t needed_access,
                                                       uint64_t* host_addr) const {
  const uint32_t index = key >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  const MrEntry& e = entries_[index];
  MrLocalSnapshot s;
  if (!TryReadMrEntryLocal(e, &s)) [[unlikely]]
    return LookupLocalSlow(e, key, addr, len, pd_id, needed_access, host_addr);
  if (int rc = CheckMrLocal(s, key, addr, len, pd_id, needed_access)) return rc;
  *host_addr = s.host_addr + (addr - s.iova);
  return 0;
}

[[gnu::always_inline]] inline int MrTable::Lookup(KeyKind kind, uint32_t key, uint64_t addr,
                                                  uint64_t len, uint32_t pd_id,
                                                  uint32_t needed_access, uint64_t* host_addr,
                                                  uint32_t qpn) const {
  if (kind == KeyKind::kLocal) return LookupLocal(key, addr, len, pd_id, needed_access, host_addr);
  uint32_t index = key >> 8;
  if (index == 0 || index >= kCapacity) return EINVAL;
  MrSnapshot s;
  ReadMrEntry(entries_[index], &s);
  if (int rc = CheckMrRemote(s, key, addr, len, pd_id, needed_access, qpn)) return rc;
  *host_addr = s.host_addr + (addr - s.iova);
  return 0;
}

[[gnu::always_inline]] inline int MrTable::ResolveSges(const ibv_sge* sge, uint32_t num_sge,
                                                       uint32_t pd_id, uint32_t needed_access,
                                                       iovec* out, uint64_t limit,
                                                       uint32_t* extents) const {
  if (num_sge == 1 && sge[0].length != 0 && limit != 0 && !extents) {
    // The common case, without the loop: around the inline lookup the
    // compiler would keep the entry's field addresses on the stack.
    uint64_t host = 0;
    if (LookupLocal(sge[0].lkey, sge[0].addr, sge[0].length, pd_id, needed_access, &host) != 0)
      return -1;
    out[0] = iovec{reinterpret_cast<void*>(host), sge[0].length < limit ? sge[0].length : limit};
    return 1;
  }
  return ResolveSgesList(sge, num_sge, pd_id, needed_access, out, limit, extents);
}

}  // namespace softrdma
