// Host-wide multicast membership (ibv_attach_mcast / ibv_detach_mcast): which
// UD QPs, in any process of this registry, receive the datagrams sent to a
// multicast GID. A NIC asks the switch fabric to replicate a multicast packet
// to every port that joined; on the shm wire the sender itself copies the
// datagram to the owner of every attached QP (transport/datagram.cpp).
//
// The table lives in the registry segment (registry.h) and, like the rest of
// it, takes no lock: a slot is claimed and released with compare-and-swap,
// and a slot whose QP's process died (or whose QPN was freed) is stale and
// reclaimed by the next attach that finds the table full.
#pragma once

#include <atomic>
#include <cstdint>

#include "host/registry.h"

namespace softrdma {

// Attachments on the whole host: each (QP, group) pair takes one slot. The
// device reports this as max_mcast_grp, max_mcast_qp_attach and
// max_total_mcast_qp_attach.
inline constexpr uint32_t kMcastTableSize = 4096;

// The destination QPN of every multicast datagram (IBA 10.5.2.3).
inline constexpr uint32_t kMulticastQpn = 0xffffff;

// A multicast GID: IPv6 multicast (ff00::/8), or an IPv4 multicast address
// (224.0.0.0/4) mapped into a GID as RoCEv2 carries it (::ffff:a.b.c.d).
bool IsMulticastGid(const uint8_t gid[16]);

// One slot of the table, shared memory. `word` is 0 for a free slot, else
// the packed (phase, QPN, owner); `mgid` is meaningful only in phase kValid.
struct McastSlot {
  std::atomic<uint64_t> word;
  uint8_t mgid[16];
  uint64_t reserved;
};
static_assert(sizeof(McastSlot) == 32);

// False for a word no process writes (a damaged registry: Registry::DamageIn).
bool McastWordPlausible(uint64_t word);

class McastGroups {
 public:
  explicit McastGroups(Registry& registry) : registry_(registry) {}

  // Attaches QP `qpn` of process `owner` to `mgid`. 0 (also when it is
  // attached already, as rxe and mlx5 answer; *added tells which), or ENOMEM
  // when the table is full of live attachments.
  int Attach(ProcRef owner, uint32_t qpn, const uint8_t mgid[16], bool* added);
  // 0, or EINVAL when that QP is not attached to `mgid`.
  int Detach(ProcRef owner, uint32_t qpn, const uint8_t mgid[16]);

  // Calls fn(qpn) for every QP attached to `mgid` whose recorded owner
  // still holds the QPN; returns how many. The caller sends to each.
  template <typename Fn>
  int ForEachMember(const uint8_t mgid[16], Fn&& fn) const {
    int members = 0;
    for (uint32_t i = 0; i < kMcastTableSize; ++i) {
      uint32_t qpn = 0;
      if (!ValidMember(i, mgid, &qpn)) continue;
      fn(qpn);
      ++members;
    }
    return members;
  }

 private:
  // Slot `i` holds a valid attachment to `mgid` by a QP its owner still
  // holds; *qpn = that QP.
  bool ValidMember(uint32_t i, const uint8_t mgid[16], uint32_t* qpn) const;
  // Frees the slots of processes that died and of QPNs no longer held by
  // the process that attached them. Returns how many it freed.
  int ReclaimStale();

  Registry& registry_;
};

}  // namespace softrdma
