// ICRC computation (see icrc.h; roce-wire.md §7). zlib's crc32 is exactly the
// CRC the ICRC uses (reflected 0xEDB88320, initial and final XOR 0xFFFFFFFF),
// and it continues a CRC across calls, so the masked IP/UDP pseudo-header and
// every transport piece are fed in turn without being copied together.
#include "wire/roce/icrc.h"

#include <zlib.h>

#include <algorithm>

#include "util/big_endian.h"

namespace softrdma::roce {
namespace {

constexpr size_t kIpv4HeaderSize = 20;
constexpr size_t kIpv6HeaderSize = 40;
constexpr size_t kUdpHeaderSize = 8;
constexpr uint8_t kIpProtoUdp = 17;
constexpr size_t kBthMaskedByte = 4;  // FECN, BECN, Resv6a

uint32_t Crc(uint32_t crc, std::span<const uint8_t> bytes) {
  return uint32_t(crc32_z(crc, bytes.data(), bytes.size()));
}

// The masked IP + UDP headers (28 or 48 bytes) into `out`; returns the length.
size_t MaskedNetworkHeaders(const NetworkHeaders& net, size_t transport_length,
                            std::span<uint8_t, kIpv6HeaderSize + kUdpHeaderSize> out) {
  const size_t udp_length = kUdpHeaderSize + transport_length + kIcrcSize;
  size_t at = 0;
  if (net.ip_version == 4) {
    out[0] = 0x45;  // version 4, IHL 5: no options on RoCE
    out[1] = 0xFF;  // TOS (masked)
    StoreBe(out, 2, 2, kIpv4HeaderSize + udp_length);
    StoreBe(out, 4, 2, net.ipv4_identification);
    StoreBe(out, 6, 2, net.ipv4_flags_fragment);
    out[8] = 0xFF;  // TTL (masked)
    out[9] = kIpProtoUdp;
    out[10] = out[11] = 0xFF;  // header checksum (masked)
    std::copy_n(net.src_gid.begin() + 12, 4, out.begin() + 12);
    std::copy_n(net.dst_gid.begin() + 12, 4, out.begin() + 16);
    at = kIpv4HeaderSize;
  } else {
    out[0] = 0x6F;  // version 6; traffic class and flow label (masked)
    out[1] = out[2] = out[3] = 0xFF;
    StoreBe(out, 4, 2, udp_length);
    out[6] = kIpProtoUdp;
    out[7] = 0xFF;  // hop limit (masked)
    std::copy(net.src_gid.begin(), net.src_gid.end(), out.begin() + 8);
    std::copy(net.dst_gid.begin(), net.dst_gid.end(), out.begin() + 24);
    at = kIpv6HeaderSize;
  }
  StoreBe(out, at + 0, 2, net.udp_src_port);
  StoreBe(out, at + 2, 2, net.udp_dst_port);
  StoreBe(out, at + 4, 2, udp_length);
  out[at + 6] = out[at + 7] = 0xFF;  // UDP checksum (masked)
  return at + kUdpHeaderSize;
}

}  // namespace

Gid Ipv4MappedGid(std::span<const uint8_t, 4> address) {
  Gid gid{};
  gid[10] = gid[11] = 0xFF;
  std::copy(address.begin(), address.end(), gid.begin() + 12);
  return gid;
}

bool IsIpv4Mapped(const Gid& gid) {
  return std::all_of(gid.begin(), gid.begin() + 10, [](uint8_t b) { return b == 0; }) &&
         gid[10] == 0xFF && gid[11] == 0xFF;
}

uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const std::span<const uint8_t>> pieces) {
  size_t transport_length = 0;
  for (const auto& piece : pieces) transport_length += piece.size();

  std::array<uint8_t, kIpv6HeaderSize + kUdpHeaderSize> pseudo{};
  const size_t pseudo_length = MaskedNetworkHeaders(net, transport_length, pseudo);
  uint32_t crc = Crc(kIcrcAfterLrhPrefix, std::span(pseudo).first(pseudo_length));

  static constexpr uint8_t kAllOnes = 0xFF;
  size_t offset = 0;  // of the current piece within the transport packet
  for (const auto& piece : pieces) {
    if (offset <= kBthMaskedByte && kBthMaskedByte < offset + piece.size()) {
      const size_t at = kBthMaskedByte - offset;
      crc = Crc(crc, piece.first(at));
      crc = Crc(crc, std::span(&kAllOnes, 1));
      crc = Crc(crc, piece.subspan(at + 1));
    } else {
      crc = Crc(crc, piece);
    }
    offset += piece.size();
  }
  return crc;
}

uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const uint8_t> transport) {
  const std::span<const uint8_t> pieces[] = {transport};
  return ComputeIcrc(net, pieces);
}

void StoreIcrc(uint32_t icrc, std::span<uint8_t, kIcrcSize> out) {
  for (size_t i = 0; i < kIcrcSize; ++i) out[i] = uint8_t(icrc >> (8 * i));
}

uint32_t LoadIcrc(std::span<const uint8_t, kIcrcSize> in) {
  uint32_t icrc = 0;
  for (size_t i = kIcrcSize; i-- > 0;) icrc = (icrc << 8) | in[i];
  return icrc;
}

}  // namespace softrdma::roce
