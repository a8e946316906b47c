// The 40-byte GRH area a UD receive buffer starts with (roce-wire.md §4 "GRH
// layout"), as a RoCEv2 NIC fills it: for IPv4-mapped GIDs 20 zero bytes and
// the IPv4 header (valid checksum, so that ibv_init_ah_from_wc classifies it
// as IPv4), else the IPv6 header. Its lengths are those of the equivalent
// packet: UDP + BTH + DETH (+ ImmDt) + payload padded to 4 + ICRC.
//
// All of it but the lengths (and the IPv4 checksum, which covers them)
// depends only on the route, so a shm sender builds it once per route
// (GrhTemplate, kept per QP by DatagramGrhCache) and each datagram copies it
// and sets the lengths: the receiver then copies the area into the receive
// buffer together with the payload (docs/design.md, "Unreliable Datagram").
#pragma once

#include <cstdint>
#include <cstring>

#include <infiniband/verbs.h>

#include "core/ah.h"
#include "core/device.h"

namespace softrdma::transport {

inline constexpr uint32_t kGrhBytes = 40;

// The L3 header of the GRH area as a RoCE NIC reports it in the
// completion's `sl` (RoCE carries no SL): mlx5 returns the CQE's packet type
// there, bit 3 = UDP present (RoCE v2), bits 2:0 = 1 (IPv6) or 2 (IPv4).
// Applications built against mlx5 rely on it: UCX 1.13's ud_verbs reads
// `sl & 7` to find the destination address in the GRH area, so a 0 made it
// read an IPv4 header as IPv6 and drop every datagram (ETH_DGID_CHECK).
inline constexpr uint8_t kSlRoceV2Ipv6 = 0x8 | 0x1;
inline constexpr uint8_t kSlRoceV2Ipv4 = 0x8 | 0x2;

// What the GRH area says of a datagram's path.
struct GrhRoute {
  ibv_gid sgid;
  ibv_gid dgid;
  uint32_t flow_label;
  uint8_t traffic_class;
  uint8_t hop_limit;
};

// A route's GRH area without its lengths.
class GrhTemplate {
 public:
  void Build(const GrhRoute& route);
  // The area of a datagram of `len` payload bytes into out[0, kGrhBytes).
  void WriteFor(bool has_imm, uint32_t len, uint8_t* out) const;
  bool ipv4() const { return ipv4_; }
  uint8_t sl() const { return ipv4_ ? kSlRoceV2Ipv4 : kSlRoceV2Ipv6; }

 private:
  alignas(16) uint8_t bytes_[kGrhBytes] = {};
  uint32_t partial_sum_ = 0;  // IPv4: the header's 16-bit words but length and checksum
  bool ipv4_ = false;
};

// A UD QP's template for the last route it sent on, rebuilt when a send
// names another route or the GID table changed (Device::gid_generation:
// the source GID is looked up by index). Keyed by the route's values, not
// by AH: a UD server that creates an AH per reply (ibv_create_ah_from_wc)
// to the same client finds it too, and nothing refers to an AH after the
// post. Not thread-safe: used under the QP's lock.
class DatagramGrhCache {
 public:
  // Inline: a compare of the route and the generation on every datagram.
  const GrhTemplate& For(const UdAddress& ud, GidLookupCache& gids) {
    if (Device::Get().gid_generation() != generation_ ||
        memcmp(ud.dgid.raw, dgid_.raw, sizeof dgid_.raw) != 0 || ud.flow_label != flow_label_ ||
        ud.sgid_index != sgid_index_ || ud.hop_limit != hop_limit_ ||
        ud.traffic_class != traffic_class_) [[unlikely]]
      Rebuild(ud, gids);
    return template_;
  }
  // Whether the last route's destination GID is an address of this host
  // (Device::IsLocalGid), kept with the template: valid after For.
  bool dgid_local() const { return dgid_local_; }
  uint64_t rebuilds() const { return rebuilds_; }  // (tests)

 private:
  void Rebuild(const UdAddress& ud, GidLookupCache& gids);
  uint64_t generation_ = 0;  // 0: nothing kept (the table's starts at 1)
  bool dgid_local_ = false;
  ibv_gid dgid_{};
  uint32_t flow_label_ = 0;
  uint8_t sgid_index_ = 0;
  uint8_t hop_limit_ = 0;
  uint8_t traffic_class_ = 0;
  GrhTemplate template_;
  uint64_t rebuilds_ = 0;
};

}  // namespace softrdma::transport
