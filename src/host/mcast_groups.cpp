#include "host/mcast_groups.h"

#include <atomic>
#include <cerrno>
#include <cstring>

namespace softrdma {

namespace {

// word = phase (bits 62-63) | owner generation (bits 27-58) | owner slot
// (bits 17-26) | QPN table index (bits 0-16; the QPN is the registry's
// QpnAt(index): every entry is of this registry's range).
enum Phase : uint64_t { kFree = 0, kClaiming = 1, kValid = 2 };
constexpr int kSlotShift = 17;
constexpr int kGenShift = 27;
constexpr int kPhaseShift = 62;
static_assert(kQpnTableSize <= (1u << kSlotShift), "QPN index field too narrow");
static_assert(kRegistryMaxProcs <= (1u << (kGenShift - kSlotShift)), "slot field too narrow");

uint64_t Pack(Phase phase, uint32_t qpn, ProcRef owner) {
  return static_cast<uint64_t>(phase) << kPhaseShift |
         static_cast<uint64_t>(owner.gen) << kGenShift |
         static_cast<uint64_t>(owner.slot) << kSlotShift | QpnIndexOf(qpn);
}
Phase PhaseOf(uint64_t w) {
  return static_cast<Phase>(w >> kPhaseShift);
}
uint32_t IndexOf(uint64_t w) {
  return static_cast<uint32_t>(w & ((1u << kSlotShift) - 1));
}
ProcRef OwnerOf(uint64_t w) {
  return ProcRef{static_cast<uint32_t>((w >> kSlotShift) & ((1u << (kGenShift - kSlotShift)) - 1)),
                 static_cast<uint32_t>(w >> kGenShift)};
}

// Reads a slot's word again after its GID was copied (a seqlock's second
// read): the copy's loads must not move after it. An acquire fence does that
// for free, but ThreadSanitizer does not model fences (GCC refuses the build
// with -Wtsan), so under it the read is a read-modify-write with release
// order, which orders the loads before it in a way TSan follows; it costs a
// locked instruction and is only for that build.
uint64_t WordAfterCopy(const std::atomic<uint64_t>& word) {
#if defined(__SANITIZE_THREAD__)
  return const_cast<std::atomic<uint64_t>&>(word).fetch_add(0, std::memory_order_acq_rel);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  return word.load(std::memory_order_relaxed);
#endif
}

}  // namespace

bool McastWordPlausible(uint64_t word) {
  // Slot and QPN fields are as wide as their tables; phase 3 is never written.
  return word == 0 || PhaseOf(word) != 3;
}

bool IsMulticastGid(const uint8_t gid[16]) {
  if (gid[0] == 0xff) return true;
  static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid, v4_mapped, sizeof v4_mapped) == 0 && (gid[12] & 0xf0) == 0xe0;
}

bool McastGroups::ValidMember(uint32_t i, const uint8_t mgid[16], uint32_t* qpn) const {
  const McastSlot& s = registry_.mcast_slots()[i];
  const uint64_t w = s.word.load(std::memory_order_acquire);
  if (PhaseOf(w) != kValid) return false;
  uint8_t seen[16];
  memcpy(seen, s.mgid, sizeof seen);
  // The slot may have been released and claimed again while we copied the
  // GID: the copy counts only if the word did not change meanwhile.
  if (WordAfterCopy(s.word) != w || memcmp(seen, mgid, sizeof seen) != 0) return false;
  ProcRef holder;
  if (!registry_.QpnOwner(registry_.QpnAt(IndexOf(w)), &holder) || !(holder == OwnerOf(w)))
    return false;
  *qpn = registry_.QpnAt(IndexOf(w));
  return true;
}

int McastGroups::Attach(ProcRef owner, uint32_t qpn, const uint8_t mgid[16], bool* added) {
  McastSlot* table = registry_.mcast_slots();
  const uint64_t valid = Pack(kValid, qpn, owner);
  *added = false;
  for (uint32_t i = 0; i < kMcastTableSize; ++i) {
    if (table[i].word.load(std::memory_order_acquire) == valid &&
        memcmp(table[i].mgid, mgid, 16) == 0)
      return 0;  // attached already (only this QP's owner writes its slots)
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < kMcastTableSize; ++i) {
      uint64_t expected = 0;
      if (!table[i].word.compare_exchange_strong(expected, Pack(kClaiming, qpn, owner),
                                                 std::memory_order_acq_rel))
        continue;
      memcpy(table[i].mgid, mgid, 16);
      table[i].word.store(valid, std::memory_order_release);
      *added = true;
      return 0;
    }
    if (ReclaimStale() == 0) break;
  }
  return ENOMEM;
}

int McastGroups::Detach(ProcRef owner, uint32_t qpn, const uint8_t mgid[16]) {
  McastSlot* table = registry_.mcast_slots();
  uint64_t valid = Pack(kValid, qpn, owner);
  for (uint32_t i = 0; i < kMcastTableSize; ++i) {
    if (table[i].word.load(std::memory_order_acquire) != valid ||
        memcmp(table[i].mgid, mgid, 16) != 0)
      continue;
    uint64_t expected = valid;
    if (table[i].word.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return 0;
  }
  return EINVAL;
}

int McastGroups::ReclaimStale() {
  McastSlot* table = registry_.mcast_slots();
  int freed = 0;
  for (uint32_t i = 0; i < kMcastTableSize; ++i) {
    uint64_t w = table[i].word.load(std::memory_order_acquire);
    if (PhaseOf(w) == kFree) continue;
    // A slot is stale once its QPN is not held (alive) by the process that
    // attached it; this also frees a claim its process died in the middle of.
    ProcRef holder;
    if (registry_.LookupQpn(registry_.QpnAt(IndexOf(w)), &holder) && holder == OwnerOf(w)) continue;
    if (table[i].word.compare_exchange_strong(w, 0, std::memory_order_acq_rel)) ++freed;
  }
  return freed;
}

}  // namespace softrdma
