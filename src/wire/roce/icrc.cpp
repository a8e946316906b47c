// ICRC computation (see icrc.h; roce-wire.md §7). ISA-L's crc32_gzip_refl is
// exactly the CRC the ICRC uses (zlib's crc32: reflected 0xEDB88320, initial
// and final XOR 0xFFFFFFFF), folded with PCLMULQDQ (~20x zlib's table loop
// here, docs/design.md), and it continues a CRC across calls, so the masked
// IP/UDP pseudo-header and every transport piece are fed in turn without
// being copied together.
#include "wire/roce/icrc.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "util/big_endian.h"

namespace softrdma::roce {
namespace {

constexpr size_t kIpv4HeaderSize = 20;
constexpr size_t kIpv6HeaderSize = 40;
constexpr size_t kUdpHeaderSize = 8;
constexpr uint8_t kIpProtoUdp = 17;
constexpr size_t kBthMaskedByte = 4;  // FECN, BECN, Resv6a

// ISA-L's AVX-512 CRC (crc32_gzip_refl_by16_10, what crc32_gzip_refl runs
// on this VM's CPU; Debian 12's libisal 2.30) returns with the upper halves
// of the vector registers dirty: it ends without vzeroupper. Every legacy SSE
// instruction after it (ours and glibc's, built for baseline x86-64) then
// pays the transition: ComputeIcrc of a 4 KiB packet took ~900 ns where the
// CRC alone takes ~150 ns. vzeroupper after each call clears that state.
const bool kCpuHasAvx = __builtin_cpu_supports("avx");

uint32_t Crc(uint32_t crc, std::span<const uint8_t> bytes) {
  const uint32_t out = crc32_gzip_refl(crc, bytes.data(), bytes.size());
  if (kCpuHasAvx) asm volatile("vzeroupper");
  return out;
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

namespace {

// Each call of the CRC costs ~25-35 ns before its first byte here (ISA-L's
// dispatch and folding setup; 4 KiB take ~140 ns), so the small parts of a
// packet are gathered into one buffer and fed in one call: the masked
// network headers, the transport headers (with BTH byte 4 masked) and any
// piece up to kGatherMax bytes. A full-MTU packet then costs two calls
// (headers, payload) instead of six or seven; empty pieces cost none.
constexpr size_t kGatherMax = 64;

class GatheredCrc {
 public:
  // Starts with the masked network headers, written in place.
  GatheredCrc(const NetworkHeaders& net, size_t transport_length) {
    length_ = MaskedNetworkHeaders(
        net, transport_length, std::span<uint8_t, kNetworkHeadersMax>(buffer_, kNetworkHeadersMax));
  }
  void Append(std::span<const uint8_t> bytes) {
    if (length_ + bytes.size() > sizeof buffer_) Flush();
    memcpy(buffer_ + length_, bytes.data(), bytes.size());
    length_ += bytes.size();
  }
  void MaskByte(size_t back) { buffer_[length_ - back] = 0xFF; }  // `back` bytes from the end
  void Direct(std::span<const uint8_t> bytes) {
    Flush();
    crc_ = Crc(crc_, bytes);
  }
  uint32_t Finish() {
    Flush();
    return crc_;
  }

 private:
  static constexpr size_t kNetworkHeadersMax = kIpv6HeaderSize + kUdpHeaderSize;
  void Flush() {
    if (length_ > 0) crc_ = Crc(crc_, std::span<const uint8_t>(buffer_, length_));
    length_ = 0;
  }
  uint32_t crc_ = kIcrcAfterLrhPrefix;
  size_t length_ = 0;
  uint8_t buffer_[kNetworkHeadersMax + 2 * kGatherMax];
};

}  // namespace

uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const std::span<const uint8_t>> pieces) {
  size_t transport_length = 0;
  for (const auto& piece : pieces) transport_length += piece.size();

  GatheredCrc crc(net, transport_length);

  size_t offset = 0;  // of the current piece within the transport packet
  for (std::span<const uint8_t> piece : pieces) {
    const size_t size = piece.size();
    const bool masked_here = offset <= kBthMaskedByte && kBthMaskedByte < offset + size;
    if (size <= kGatherMax) {
      crc.Append(piece);
      if (masked_here) crc.MaskByte(size - (kBthMaskedByte - offset));
    } else {
      if (masked_here) {
        // A large piece that begins with the BTH (a received packet): its
        // head up to the masked byte joins the gathered bytes.
        const size_t head = kBthMaskedByte - offset + 1;
        crc.Append(piece.first(head));
        crc.MaskByte(1);
        piece = piece.subspan(head);
      }
      crc.Direct(piece);
    }
    offset += size;
  }
  return crc.Finish();
}

uint32_t ComputeIcrc(const NetworkHeaders& net, std::span<const uint8_t> transport) {
  const std::span<const uint8_t> pieces[] = {transport};
  return ComputeIcrc(net, pieces);
}

namespace {

// Per transport length, the deltas of the ID bits below kIpv4IdSearch: the
// delta is linear in the ID (an XOR of its bits' deltas). One entry per
// thread: full-MTU segments all have one length.
constexpr int kIdBits = 6;
static_assert(1 << kIdBits == kIpv4IdSearch);

struct IdDeltas {
  size_t transport_length = SIZE_MAX;
  uint32_t bit[16] = {};
};

// The delta of ID bit b (0..15) followed by `zeros` zero bytes: CRC-32
// without its initial and final inversion (the parts two equal-length
// inputs share cancel in the XOR), then shifted over the bytes after it.
uint32_t BitDelta(int b, uint64_t zeros_op) {
  const uint8_t id[2] = {uint8_t((1u << b) >> 8), uint8_t(1u << b)};
  static const uint8_t kZeros[2] = {0, 0};
  const uint32_t linear = uint32_t(crc32(0, id, 2) ^ crc32(0, kZeros, 2));
  return uint32_t(crc32_combine_op(linear, 0, uLong(zeros_op)));
}

const IdDeltas& DeltasFor(size_t transport_length, int bits) {
  thread_local IdDeltas cache;
  thread_local int cached_bits = 0;
  if (cache.transport_length != transport_length || cached_bits < bits) {
    // After the ID: the rest of the IPv4 header (14 bytes), the UDP header,
    // the transport packet.
    const uint64_t op = crc32_combine_gen64(z_off64_t(14 + kUdpHeaderSize + transport_length));
    for (int b = 0; b < bits; ++b) cache.bit[b] = BitDelta(b, op);
    cache.transport_length = transport_length;
    cached_bits = bits;
  }
  return cache;
}

}  // namespace

uint32_t Ipv4IdIcrcDelta(uint16_t id, size_t transport_length) {
  const IdDeltas& d = DeltasFor(transport_length, id < kIpv4IdSearch ? kIdBits : 16);
  uint32_t delta = 0;
  for (uint32_t bits = id; bits != 0; bits &= bits - 1) delta ^= d.bit[__builtin_ctz(bits)];
  return delta;
}

int FindIpv4IdForIcrcDelta(uint32_t delta, size_t transport_length) {
  if (delta == 0) return -1;  // ID 0 itself
  const IdDeltas& d = DeltasFor(transport_length, kIdBits);
  // Gray code order: each step flips one bit, so one XOR per candidate.
  uint32_t value = 0;
  for (int i = 1; i < kIpv4IdSearch; ++i) {
    const int flip = __builtin_ctz(unsigned(i));
    value ^= d.bit[flip];
    if (value == delta) return i ^ (i >> 1);
  }
  return -1;
}

}  // namespace softrdma::roce
