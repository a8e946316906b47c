// The host registry: one shared-memory segment per user per host (mode 0600,
// named <prefix>-registry, see util/config.h) that every softrdma process
// maps. It holds
//  - the process table: which processes are attached, each with a slot index
//    and a generation that changes every time the slot is reused;
//  - the QPN table: QPNs are unique on the device, as on a real HCA, and
//    each names its owning process (slot + generation); the registry hands
//    out the QPNs of its own range (host/qpn_range.h), so QPNs of different
//    registries (users, namespaces) never collide;
//  - per QPN, the QP attributes initiators need for one-sided operations
//    (host/published_qp.h), and the host-wide atomic locks (atomic_locks.h);
//  - the multicast attachments of UD QPs (host/mcast_groups.h).
// There is no daemon and no lock: entries are claimed with compare-and-swap,
// and an entry whose process has died (even by SIGKILL) is simply reclaimed
// by the next process that needs one. Generations make stale references
// (a QPN of a dead process, a ring of a previous slot owner) detectable.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <sys/types.h>

#include "host/atomic_locks.h"
#include "host/published_qp.h"
#include "host/qpn_range.h"
#include "util/status.h"

namespace softrdma {

struct McastSlot;

inline constexpr uint32_t kRegistryMaxProcs = 1024;
// QPN 0 and 1 are the SMI and GSI QPs of every port; real HCAs never hand
// them out, and neither do we (no registry hands out an index below this).
inline constexpr uint32_t kFirstQpn = 0x11;

struct ProcRef {
  uint32_t slot = 0;
  uint32_t gen = 0;
  bool operator==(const ProcRef&) const = default;
};

class Registry {
 public:
  // Maps (creating on first use) the registry of this user/namespace.
  static Status Open(Registry* out);
  Registry() = default;
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Claims a process slot for the calling process (reclaiming a dead one).
  // `on_reclaim` is told about the previous owner of a reclaimed slot so its
  // leftovers (its ring) can be removed.
  Status AttachProcess(ProcRef* me, void (*on_reclaim)(ProcRef dead));
  void DetachProcess(ProcRef me);

  // pid of the live process holding `ref`, or 0 if that process is gone.
  pid_t LivePid(ProcRef ref) const;

  // The slot of this registry's QPN range (host/qpn_range.h), and whether
  // `qpn` is of that range (false: another registry's, reached over RoCE).
  uint32_t qpn_slot() const { return qpn_base_ >> kQpnIndexBits; }
  bool OwnsQpn(uint32_t qpn) const { return (qpn ^ qpn_base_) < kQpnTableSize; }
  // The table index of one of our QPNs; kQpnTableSize (out of every table)
  // for another registry's.
  uint32_t IndexOf(uint32_t qpn) const {
    const uint32_t index = qpn ^ qpn_base_;
    return index < kQpnTableSize ? index : kQpnTableSize;
  }
  uint32_t QpnAt(uint32_t index) const { return qpn_base_ | index; }

  // QPN allocation; QPNs are handed out round-robin so that a destroyed QP's
  // number is not reused soon (a late message must not reach a new QP).
  Status AllocQpn(ProcRef owner, uint32_t* qpn);
  void FreeQpn(ProcRef owner, uint32_t qpn);
  // Owner of a QPN; false if unallocated or its owner is dead.
  bool LookupQpn(uint32_t qpn, ProcRef* owner) const;
  // The recorded owner of `qpn` without the liveness check (no system
  // call): enough to tell whether a cached resolution still holds, since a
  // reassigned QPN or a reclaimed slot changes the recorded owner.
  bool QpnOwner(uint32_t qpn, ProcRef* owner) const;

  // One-sided operations: the published attributes of a QP (nullptr for a
  // QPN out of range) and the host-wide atomic lock words.
  PublishedQp* published_qp(uint32_t qpn) const {  // inline: read on every one-sided post
    const uint32_t index = IndexOf(qpn);
    return index < kQpnTableSize ? &published_qps_[index] : nullptr;
  }
  std::atomic<uint32_t>* atomic_lock_words() const;
  // The multicast attachment table (host/mcast_groups.h).
  McastSlot* mcast_slots() const;

  // Name of the shm object holding a process's ring and MR table.
  static std::string ProcSegmentName(ProcRef ref);
  static std::string RegistryName();

 private:
  struct Layout;
  // What is wrong in the tables of a registry with a good header, or "".
  static std::string DamageIn(const Layout& l);
  bool EntryAlive(uint32_t slot, uint64_t owner_word) const;
  Layout* layout_ = nullptr;
  PublishedQp* published_qps_ = nullptr;  // inside *layout_
  uint32_t qpn_base_ = 0;                 // QpnInSlot(our slot, 0)
  uint64_t self_start_time_ = 0;          // recorded by AttachProcess: our own entries are alive
  size_t bytes_ = 0;
};

}  // namespace softrdma
