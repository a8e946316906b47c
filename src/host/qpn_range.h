// Which registry a QPN belongs to. Every registry (each user, each
// SOFTRDMA_NAMESPACE) numbers its QPs in a range of its own: a 24-bit QPN is
// the registry's slot in the high bits and an index into its QPN table in
// the low 17, so the number alone says whose QP it names. A process that
// receives a RoCE datagram for another registry's QPN hands it to that
// registry's gateway (design.md, "Users on one host"), and the wire choice
// is exact: a peer QPN of our slot on a GID of ours is reached through
// shared memory, any other over the RoCE wire.
#pragma once

#include <cstdint>
#include <string_view>

#include <sys/types.h>

namespace softrdma {

inline constexpr uint32_t kQpnIndexBits = 17;
inline constexpr uint32_t kQpnTableSize = 1u << kQpnIndexBits;
// Slots 0..126: slot 127 would hand out 0xffffff, the multicast QPN.
inline constexpr uint32_t kQpnSlots = 127;

// The slot of the registry of `uid` in namespace `ns` ("" = the user's
// default registry): uid mod 127 for the default registry (root 0, nobody
// 65534 -> 2: users with nearby uids never collide), a hash of the namespace
// added for the others. Deterministic, so every process of a registry
// agrees without asking; two registries of one slot cannot tell their QPNs
// apart on the RoCE wire (documented limitation).
uint32_t QpnSlotFor(std::string_view ns, uid_t uid);

inline constexpr uint32_t QpnSlotOf(uint32_t qpn) {
  return qpn >> kQpnIndexBits;
}
inline constexpr uint32_t QpnIndexOf(uint32_t qpn) {
  return qpn & (kQpnTableSize - 1);
}
inline constexpr uint32_t QpnInSlot(uint32_t slot, uint32_t index) {
  return slot << kQpnIndexBits | index;
}

}  // namespace softrdma
