// The IPv4-mapped GID ::ffff:a.b.c.d, as a RoCEv2 GID table holds an IPv4
// address (unit tests of the GID caches and the GRH area).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softrdma::testing {

inline ibv_gid MappedIpv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  ibv_gid gid{};
  gid.raw[10] = 0xff;
  gid.raw[11] = 0xff;
  gid.raw[12] = a;
  gid.raw[13] = b;
  gid.raw[14] = c;
  gid.raw[15] = d;
  return gid;
}

}  // namespace softrdma::testing
