// Sample packets of every opcode, shared by the codec's round-trip tests,
// the fuzz corpus generator (tests/fuzz/make_roce_corpus.cpp) and the
// capture tests (tests/roce_icrc/make_captures.cpp): header values a real
// sender would use, set only in the headers the opcode carries (the parser
// leaves the others at their defaults, so a parsed sample equals its source).
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/roce/packet.h"

namespace softrdma::roce::samples {

// A payload length the opcode's rule allows for a path MTU of `mtu` bytes:
// LAST leaves 3 pad bytes, ONLY 2.
inline size_t PayloadLength(const OpcodeInfo& info, size_t mtu) {
  switch (info.payload) {
    case PayloadRule::kNone:
      return 0;
    case PayloadRule::kFullMtu:
      return mtu;
    case PayloadRule::kOneToMtu:
      return mtu - 3;
    case PayloadRule::kZeroToMtu:
      return 6;
    case PayloadRule::kExactly8:
      return 8;
  }
  return 0;
}

inline TransportHeaders Headers(const OpcodeInfo& info, uint32_t psn) {
  TransportHeaders h;
  h.bth = Bth{.opcode = info.opcode,
              .becn = info.service == TransportService::kCnp,
              .dest_qp = 0x000012,
              .ack_req = info.ack_req == AckReqRule::kOnEnd && info.IsLastOfMessage(),
              .psn = psn & kPsnMask};
  if (info.Has(kRdethBit)) h.rdeth.eecn = 0x000001;
  if (info.Has(kDethBit)) h.deth = Deth{.qkey = 0x11111111, .src_qp = 0x000011};
  if (info.Has(kFethBit)) h.feth = Feth{.selectivity = 1, .placement = 1};
  if (info.Has(kRethBit)) h.reth = Reth{.va = 0x7f0000001000, .rkey = 0x1234, .dma_length = 2048};
  if (info.Has(kAtomicEthBit)) {
    h.atomic_eth = AtomicEth{.va = 0x7f0000002000, .rkey = 0x1234, .swap_add = 5, .compare = 6};
  }
  if (info.Has(kImmDtBit)) h.imm_data = 0x01020304;
  if (info.Has(kIethBit)) h.invalidate_rkey = 0x5678;
  if (info.Has(kAethBit)) h.aeth = Aeth{.syndrome = kAckNoCredits, .msn = psn & kPsnMask};
  if (info.Has(kAtomicAckEthBit)) h.atomic_ack.original = 0x0102030405060708;
  return h;
}

// 192.168.1.10 -> 192.168.1.20 (IPv4) or fd00::1 -> fd00::2 (IPv6), UDP
// source port 0xC132, as in roce-wire.md §8.
inline NetworkHeaders Net(uint8_t ip_version) {
  NetworkHeaders net;
  net.ip_version = ip_version;
  if (ip_version == 4) {
    const uint8_t a[4] = {192, 168, 1, 10}, b[4] = {192, 168, 1, 20};
    net.src_gid = Ipv4MappedGid(a);
    net.dst_gid = Ipv4MappedGid(b);
  } else {
    net.src_gid[0] = net.dst_gid[0] = 0xfd;
    net.src_gid[15] = 1;
    net.dst_gid[15] = 2;
  }
  net.udp_src_port = 0xC132;
  return net;
}

}  // namespace softrdma::roce::samples
