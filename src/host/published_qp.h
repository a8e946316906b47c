// What an initiator must know about a target QP to execute RDMA READ, WRITE
// and atomics itself (without the target's CPU): its PD, its remote access
// flags, its state and whom it is connected to. The owner publishes these in
// the host registry, one entry per QPN, under a sequence counter; initiators
// in other processes read them seqlock-style (odd = being changed).
#pragma once

#include <atomic>
#include <cstdint>

#include "util/seqlock.h"

namespace softrdma {

struct PublishedQp {
  std::atomic<uint32_t> seq;
  uint32_t owner_slot;  // registry slot + generation of the owning process:
  uint32_t owner_gen;   // a QPN reused by another process never matches
  uint32_t pd_id;       // the owner's PD id (MR entries record the same ids)
  uint32_t access;      // qp_access_flags (IBV_ACCESS_REMOTE_*) | kPublishedNoReadResources
  uint32_t state;       // ibv_qp_state
  uint32_t dest_qpn;    // the QP it is connected to (RC)
  uint32_t type;        // ibv_qp_type
};
static_assert(sizeof(PublishedQp) == 32);

// In PublishedQp::access: the QP's max_dest_rd_atomic is 0, so it accepts no
// READ or atomic (a bit no IBV_ACCESS_* flag uses).
inline constexpr uint32_t kPublishedNoReadResources = 1u << 31;

// XRC. SRQ numbers come from the QPN space, so an XRC SRQ publishes its own
// entry: type kPublishedXrcSrq, pd_id = the SRQ's PD (what rkeys of RDMA
// and atomics through an XRC target are checked against), dest_qpn = its
// domain's token (core/xrcd.h), state RTS while it exists. An XRC target
// QP, which has no PD, publishes its domain's token as pd_id.
inline constexpr uint32_t kPublishedXrcSrq = 0x5852;  // no ibv_qp_type has this value

// A consistent copy of a published entry.
struct QpSnapshot {
  uint32_t owner_slot, owner_gen, pd_id, access, state, dest_qpn, type;
};

// Writer side (the owner, under the QP's lock).
inline void PublishQpEntry(PublishedQp& e, const QpSnapshot& s) {
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  e.seq.store(seq + 1, std::memory_order_relaxed);
  SeqlockStore(&e.owner_slot, s.owner_slot);
  SeqlockStore(&e.owner_gen, s.owner_gen);
  SeqlockStore(&e.pd_id, s.pd_id);
  SeqlockStore(&e.access, s.access);
  SeqlockStore(&e.state, s.state);
  SeqlockStore(&e.dest_qpn, s.dest_qpn);
  SeqlockStore(&e.type, s.type);
  e.seq.store(seq + 2, std::memory_order_release);
}

// Reader side: one attempt; false = the owner was changing the entry.
// Straight-line so that callers on the post path keep it in registers.
[[gnu::always_inline]] inline bool TryReadQpEntry(const PublishedQp& e, QpSnapshot* s) {
  uint32_t s1 = e.seq.load(std::memory_order_acquire);
  *s = QpSnapshot{SeqlockLoad(&e.owner_slot), SeqlockLoad(&e.owner_gen), SeqlockLoad(&e.pd_id),
                  SeqlockLoad(&e.access),     SeqlockLoad(&e.state),     SeqlockLoad(&e.dest_qpn),
                  SeqlockLoad(&e.type)};
  return !(s1 & 1) && e.seq.load(std::memory_order_relaxed) == s1;
}

// Retries while the owner is changing the entry.
[[gnu::noinline]] inline QpSnapshot ReadQpEntrySlow(const PublishedQp& e) {
  QpSnapshot s;
  while (!TryReadQpEntry(e, &s)) __builtin_ia32_pause();
  return s;
}

[[gnu::always_inline]] inline QpSnapshot ReadQpEntry(const PublishedQp& e) {
  QpSnapshot s;
  if (TryReadQpEntry(e, &s)) [[likely]]
    return s;
  return ReadQpEntrySlow(e);
}

}  // namespace softrdma
