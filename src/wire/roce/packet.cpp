// Transport packet codec (see packet.h). Both directions walk the opcode's
// header set in wire order through one pair of per-header functions, so the
// encoder and parser cannot disagree on where a header sits.
#include "wire/roce/packet.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace softrdma::roce {
namespace {

static_assert(kMaxTransportHeaderLength == kBthSize + kRdethSize + kDethSize + kAtomicEthSize);

Status Fail(int code, const char* format, ...) __attribute__((format(printf, 2, 3)));
Status Fail(int code, const char* format, ...) {
  char text[160];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return Status::Error(code, text);
}

template <size_t N>
std::span<uint8_t, N> At(std::span<uint8_t> bytes, size_t offset) {
  return bytes.subspan(offset).first<N>();
}
template <size_t N>
std::span<const uint8_t, N> At(std::span<const uint8_t> bytes, size_t offset) {
  return bytes.subspan(offset).first<N>();
}

void WriteHeader(HeaderBit bit, const TransportHeaders& h, std::span<uint8_t> out, size_t at) {
  switch (bit) {
    case kRdethBit:
      return EncodeRdeth(h.rdeth, At<kRdethSize>(out, at));
    case kDethBit:
      return EncodeDeth(h.deth, At<kDethSize>(out, at));
    case kFethBit:
      return EncodeFeth(h.feth, At<kFethSize>(out, at));
    case kRethBit:
      return EncodeReth(h.reth, At<kRethSize>(out, at));
    case kAtomicEthBit:
      return EncodeAtomicEth(h.atomic_eth, At<kAtomicEthSize>(out, at));
    case kImmDtBit:
      return EncodeWord32(h.imm_data, At<kImmDtSize>(out, at));
    case kIethBit:
      return EncodeWord32(h.invalidate_rkey, At<kIethSize>(out, at));
    case kAethBit:
      return EncodeAeth(h.aeth, At<kAethSize>(out, at));
    case kAtomicAckEthBit:
      return EncodeAtomicAckEth(h.atomic_ack, At<kAtomicAckEthSize>(out, at));
    case kCnpReservedBit: {
      auto reserved = At<kCnpReservedSize>(out, at);
      std::fill(reserved.begin(), reserved.end(), uint8_t{0});
      return;
    }
  }
}

void ReadHeader(HeaderBit bit, std::span<const uint8_t> in, size_t at, TransportHeaders* h) {
  switch (bit) {
    case kRdethBit:
      h->rdeth = DecodeRdeth(At<kRdethSize>(in, at));
      return;
    case kDethBit:
      h->deth = DecodeDeth(At<kDethSize>(in, at));
      return;
    case kFethBit:
      h->feth = DecodeFeth(At<kFethSize>(in, at));
      return;
    case kRethBit:
      h->reth = DecodeReth(At<kRethSize>(in, at));
      return;
    case kAtomicEthBit:
      h->atomic_eth = DecodeAtomicEth(At<kAtomicEthSize>(in, at));
      return;
    case kImmDtBit:
      h->imm_data = DecodeWord32(At<kImmDtSize>(in, at));
      return;
    case kIethBit:
      h->invalidate_rkey = DecodeWord32(At<kIethSize>(in, at));
      return;
    case kAethBit:
      h->aeth = DecodeAeth(At<kAethSize>(in, at));
      return;
    case kAtomicAckEthBit:
      h->atomic_ack = DecodeAtomicAckEth(At<kAtomicAckEthSize>(in, at));
      return;
    case kCnpReservedBit:
      return;  // reserved: ignored on receive
  }
}

// Calls fn(bit, offset) for each extension header of `info`, in wire order.
template <typename Fn>
void ForEachHeader(const OpcodeInfo& info, Fn&& fn) {
  size_t offset = kBthSize;
  for (unsigned i = 0; i < kHeaderKinds; ++i) {
    const auto bit = HeaderBit(1u << i);
    if (!info.Has(bit)) continue;
    fn(bit, offset);
    offset += HeaderSize(bit);
  }
}

bool IsPathMtu(size_t length) {
  return length == 256 || length == 512 || length == 1024 || length == 2048 || length == 4096;
}

// The payload rule with the path MTU unknown: any InfiniBand MTU will do.
bool PayloadAllowed(const OpcodeInfo& info, size_t length) {
  switch (info.payload) {
    case PayloadRule::kNone:
      return length == 0;
    case PayloadRule::kFullMtu:
      return IsPathMtu(length);
    case PayloadRule::kOneToMtu:
      return length >= 1 && length <= kMaxPayload;
    case PayloadRule::kZeroToMtu:
      return length <= kMaxPayload;
    case PayloadRule::kExactly8:
      return length == 8;
  }
  return false;
}

}  // namespace

size_t PacketLength(const OpcodeInfo& info, size_t payload_length) {
  return info.header_length + payload_length + PadCount(payload_length) + kIcrcSize;
}

Status EncodeTransportHeaders(const TransportHeaders& headers, size_t payload_length,
                              std::span<uint8_t> out, size_t* written) {
  const OpcodeInfo* info = FindOpcode(headers.bth.opcode);
  if (info == nullptr) return Fail(EINVAL, "unknown opcode 0x%02x", headers.bth.opcode);
  if (!PayloadAllowed(*info, payload_length)) {
    return Fail(EINVAL, "%s cannot carry %zu payload bytes", info->name, payload_length);
  }
  if (out.size() < info->header_length) {
    return Fail(ENOBUFS, "%s needs %u header bytes, %zu given", info->name, info->header_length,
                out.size());
  }
  Bth bth = headers.bth;
  bth.pad_count = PadCount(payload_length);
  bth.tver = 0;
  EncodeBth(bth, At<kBthSize>(out, 0));
  ForEachHeader(*info, [&](HeaderBit bit, size_t at) { WriteHeader(bit, headers, out, at); });
  *written = info->header_length;
  return Status::Ok();
}

Status EncodePacket(const NetworkHeaders& net, const TransportHeaders& headers,
                    std::span<const uint8_t> payload, std::span<uint8_t> out, size_t* written) {
  size_t header_length = 0;
  Status status = EncodeTransportHeaders(headers, payload.size(), out, &header_length);
  if (!status.ok()) return status;
  const size_t pad = PadCount(payload.size());
  const size_t total = header_length + payload.size() + pad + kIcrcSize;
  if (out.size() < total) {
    return Fail(ENOBUFS, "packet needs %zu bytes, %zu given", total, out.size());
  }
  std::copy(payload.begin(), payload.end(), out.begin() + header_length);
  std::fill_n(out.begin() + header_length + payload.size(), pad, uint8_t{0});
  const size_t icrc_at = total - kIcrcSize;
  StoreIcrc(ComputeIcrc(net, out.first(icrc_at)), At<kIcrcSize>(out, icrc_at));
  *written = total;
  return Status::Ok();
}

Status ParseTransport(std::span<const uint8_t> bytes, PacketView* view) {
  if (bytes.size() < kBthSize + kIcrcSize) {
    return Fail(EMSGSIZE, "%zu bytes: shorter than a BTH and an ICRC", bytes.size());
  }
  const Bth bth = DecodeBth(At<kBthSize>(bytes, 0));
  const OpcodeInfo* info = FindOpcode(bth.opcode);
  if (info == nullptr) return Fail(EOPNOTSUPP, "unknown opcode 0x%02x", bth.opcode);
  if (bth.tver != 0) return Fail(EPROTONOSUPPORT, "transport version %u", bth.tver);
  if (bytes.size() < size_t(info->header_length) + bth.pad_count + kIcrcSize) {
    return Fail(EMSGSIZE, "%zu bytes: shorter than the %s headers, pad %u and ICRC", bytes.size(),
                info->name, bth.pad_count);
  }
  const size_t padded = bytes.size() - info->header_length - kIcrcSize;
  // The headers are whole 4-byte words, so payload + pad must be too; with
  // PadCnt < 4 that makes PadCnt exactly (-payload) mod 4.
  if (padded % 4 != 0) {
    return Fail(EBADMSG, "%s: payload + pad of %zu bytes is not a multiple of 4", info->name,
                padded);
  }
  const size_t payload_length = padded - bth.pad_count;
  if (!PayloadAllowed(*info, payload_length)) {
    return Fail(EBADMSG, "%s cannot carry %zu payload bytes", info->name, payload_length);
  }
  view->info = info;
  view->headers = TransportHeaders{};
  view->headers.bth = bth;
  ForEachHeader(*info,
                [&](HeaderBit bit, size_t at) { ReadHeader(bit, bytes, at, &view->headers); });
  view->payload = bytes.subspan(info->header_length, payload_length);
  view->icrc = LoadIcrc(At<kIcrcSize>(bytes, bytes.size() - kIcrcSize));
  return Status::Ok();
}

Status VerifyIcrc(const NetworkHeaders& net, std::span<const uint8_t> bytes) {
  if (bytes.size() < kBthSize + kIcrcSize) {
    return Fail(EMSGSIZE, "%zu bytes: shorter than a BTH and an ICRC", bytes.size());
  }
  const size_t icrc_at = bytes.size() - kIcrcSize;
  const uint32_t received = LoadIcrc(At<kIcrcSize>(bytes, icrc_at));
  const uint32_t computed = ComputeIcrc(net, bytes.first(icrc_at));
  if (received != computed) {
    return Fail(EILSEQ, "ICRC 0x%08x received, 0x%08x computed", received, computed);
  }
  return Status::Ok();
}

Status VerifyIcrcAnyIpv4Id(const NetworkHeaders& net, std::span<const uint8_t> bytes,
                           uint16_t likely_id) {
  if (bytes.size() < kBthSize + kIcrcSize) {
    return Fail(EMSGSIZE, "%zu bytes: shorter than a BTH and an ICRC", bytes.size());
  }
  const size_t icrc_at = bytes.size() - kIcrcSize;
  const uint32_t received = LoadIcrc(At<kIcrcSize>(bytes, icrc_at));
  const uint32_t computed = ComputeIcrc(net, bytes.first(icrc_at));
  if (received == computed) return Status::Ok();
  if (net.ip_version == 4 && net.ipv4_identification == 0) {
    const uint32_t delta = received ^ computed;
    if (likely_id > 0 && likely_id < kIpv4IdSearch && delta == Ipv4IdIcrcDelta(likely_id, icrc_at))
      return Status::Ok();
    if (FindIpv4IdForIcrcDelta(delta, icrc_at) > 0) return Status::Ok();
  }
  return Fail(EILSEQ, "ICRC 0x%08x received, 0x%08x computed%s", received, computed,
              net.ip_version == 4 ? " for IPv4 ID 0, no other ID matches" : "");
}

Status ParsePacket(const NetworkHeaders& net, std::span<const uint8_t> bytes, PacketView* view) {
  Status status = ParseTransport(bytes, view);
  if (!status.ok()) return status;
  return VerifyIcrc(net, bytes);
}

Status CheckPayloadForPathMtu(const OpcodeInfo& info, size_t length, size_t path_mtu) {
  bool ok = false;
  switch (info.payload) {
    case PayloadRule::kNone:
      ok = length == 0;
      break;
    case PayloadRule::kFullMtu:
      ok = length == path_mtu;
      break;
    case PayloadRule::kOneToMtu:
      ok = length >= 1 && length <= path_mtu;
      break;
    case PayloadRule::kZeroToMtu:
      ok = length <= path_mtu;
      break;
    case PayloadRule::kExactly8:
      ok = length == 8;
      break;
  }
  if (ok) return Status::Ok();
  return Fail(EBADMSG, "%s: %zu payload bytes with a path MTU of %zu", info.name, length, path_mtu);
}

}  // namespace softrdma::roce
