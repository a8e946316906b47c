// Address handles: where a UD send goes. On this RoCE port an address is a
// GID (the GRH is mandatory: Ethernet has no LIDs), so an AH keeps the
// attributes it was created with and a UD send WR copies the part the wire
// needs (UdAddress) into its WQE at post time; the application may then
// destroy the AH as soon as the send has completed.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

namespace softrdma {

struct Ah {
  ibv_ah ah;
  ibv_ah_attr attr;
  static Ah* From(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }
};
static_assert(offsetof(Ah, ah) == 0);

// What a UD send WQE remembers of its destination.
struct UdAddress {
  ibv_gid dgid;
  uint32_t flow_label;
  uint32_t remote_qpn;
  uint32_t remote_qkey;  // after the "controlled Q_Key" substitution
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

}  // namespace softrdma
