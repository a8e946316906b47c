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

// Solving for the ID. In the CRC's reflected register (bit 31 holds x^0,
// bit 0 x^31) the delta of ID `id` is m(x) * x^(32 + 8n) mod P, where m(x)
// is the ID's 16 bits in the order they are sent and n the number of bytes
// after the ID: the raw CRC of two bytes is m(x) * x^32, and each byte after
// them multiplies by x^8. x is invertible mod P (P has a constant term), so
// multiplying a delta by x^-(32 + 8n) gives m(x) back: a polynomial of degree
// below 16, its 16 higher coefficients zero, whatever the ID.
namespace {

constexpr uint32_t kReflectedPoly = 0xEDB88320;  // P without x^32, reflected
constexpr uint32_t kOne = 0x80000000;            // the polynomial 1

constexpr uint32_t TimesX(uint32_t r) {
  return (r >> 1) ^ ((r & 1) != 0 ? kReflectedPoly : 0);
}
// The inverse of TimesX: a set bit 31 can only come from the reduction (the
// shift leaves bit 31 clear), which happens when x^31 was set.
constexpr uint32_t DividedByX(uint32_t r) {
  return (r & kOne) != 0 ? ((r ^ kReflectedPoly) << 1) | 1 : r << 1;
}
// a * b mod P, four coefficients of `a` at a time (Horner's rule, from the
// highest) with the 16 multiples of b by a nibble's polynomial.
// A register nibble (reg >> s) & 0xF holds, from its bit 3 down, x^0..x^3
// of its group: bit k is x^(3 - k).
struct ReductionTable {  // r * x^4 = (r >> 4) ^ reduce[r & 0xF]
  uint32_t reduce[16] = {};
  constexpr ReductionTable() {
    for (uint32_t low = 0; low < 16; ++low) {
      uint32_t r = low;
      for (int i = 0; i < 4; ++i) r = TimesX(r);
      reduce[low] = r;
    }
  }
};
constexpr ReductionTable kReduction;

struct Multiples {
  uint32_t of[16] = {};  // of[raw nibble] = its polynomial * b
  constexpr explicit Multiples(uint32_t b) {
    const uint32_t b1 = TimesX(b), b2 = TimesX(b1), b3 = TimesX(b2);
    for (uint32_t raw = 1; raw < 16; ++raw) {
      of[raw] = ((raw & 8) != 0 ? b : 0) ^ ((raw & 4) != 0 ? b1 : 0) ^ ((raw & 2) != 0 ? b2 : 0) ^
                ((raw & 1) != 0 ? b3 : 0);
    }
  }
  constexpr uint32_t Times(uint32_t a) const {
    uint32_t product = of[a & 0xF];  // x^28 .. x^31
    for (int shift = 4; shift < 32; shift += 4)
      product = (product >> 4) ^ kReduction.reduce[product & 0xF] ^ of[(a >> shift) & 0xF];
    return product;
  }
};

constexpr uint32_t MultiplyMod(uint32_t a, uint32_t b) {
  return Multiples(b).Times(a);
}

// x^-(2^k) mod P for k = 0..31, by squaring x^-1.
struct InversePowers {
  uint32_t of_two_to[32] = {};
  constexpr InversePowers() {
    of_two_to[0] = DividedByX(kOne);
    for (int k = 1; k < 32; ++k) of_two_to[k] = MultiplyMod(of_two_to[k - 1], of_two_to[k - 1]);
  }
};
constexpr InversePowers kInversePowers;
static_assert(MultiplyMod(kInversePowers.of_two_to[0], TimesX(kOne)) == kOne);

// The multiples of x^-(32 + 8n) mod P, n the bytes after the ID of a
// transport packet of `transport_length` bytes: one multiplication per set
// bit of the exponent (at most 17 for a 9000-byte datagram), cached per
// thread for four lengths (a message's full packets and its last one).
const Multiples& UndoShiftFor(size_t transport_length) {
  struct Entry {
    size_t transport_length = SIZE_MAX;
    Multiples undo{0};
  };
  thread_local Entry cache[4];
  Entry& entry = cache[transport_length % 4];
  if (entry.transport_length != transport_length) {
    const uint64_t exponent = 32 + 8 * (14 + kUdpHeaderSize + uint64_t{transport_length});
    uint32_t factor = kOne;
    for (int k = 0; k < 32 && (exponent >> k) != 0; ++k)
      if (((exponent >> k) & 1) != 0) factor = MultiplyMod(factor, kInversePowers.of_two_to[k]);
    entry.transport_length = transport_length;
    entry.undo = Multiples(factor);
  }
  return entry.undo;
}

}  // namespace

int FindIpv4IdForIcrcDelta(uint32_t delta, size_t transport_length) {
  if (delta == 0) return -1;  // ID 0 itself
  const uint32_t id_polynomial = UndoShiftFor(transport_length).Times(delta);
  // x^16 .. x^31 (register bits 15..0) must be zero: a delta that is not an
  // ID's (a corrupted packet) passes this with probability 2^-16.
  if ((id_polynomial & 0xFFFF) != 0) return -1;
  // Register bits 16 + t hold the ID's t-th bit on the wire: the high byte
  // first, each byte least significant bit first (the reflected CRC).
  return int(__builtin_bswap16(uint16_t(id_polynomial >> 16)));
}

}  // namespace softrdma::roce
