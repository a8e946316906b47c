#include "util/gsi_route.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/config.h"

namespace softrdma {
namespace {

// MAD header (ib-cm.md §2) and CM message offsets (ib-cm.md §3, relative to
// the MAD's first byte: the message starts at 24).
constexpr size_t kBaseVersionOffset = 0;
constexpr size_t kMgmtClassOffset = 1;
constexpr size_t kAttributeIdOffset = 16;
constexpr size_t kMessageOffset = 24;
constexpr size_t kRemoteCommIdOffset = kMessageOffset + 4;  // every connected message
constexpr size_t kRequestIdOffset = kMessageOffset + 0;     // SIDR_REP
constexpr size_t kServiceIdOffset = kMessageOffset + 8;     // REQ and SIDR_REQ
constexpr uint8_t kMadBaseVersion = 1;
constexpr uint8_t kMgmtClassCm = 0x07;
constexpr uint16_t kRejInvalidServiceId = 8;
constexpr uint8_t kSidrServiceIdNotSupported = 1;

enum : uint16_t {
  kAttrReq = 0x0010,
  kAttrMra = 0x0011,
  kAttrRej = 0x0012,
  kAttrRep = 0x0013,
  kAttrRtu = 0x0014,
  kAttrDreq = 0x0015,
  kAttrDrep = 0x0016,
  kAttrSidrReq = 0x0017,
  kAttrSidrRep = 0x0018,
};

constexpr uint8_t kEnvelopeMagic[8] = {'s', 'r', 'g', 's', 'i', 0, 0, 1};

uint64_t LoadBe(std::span<const uint8_t> bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value = (value << 8) | bytes[offset + i];
  return value;
}

void StoreBe(std::span<uint8_t> bytes, size_t offset, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) bytes[offset + width - 1 - i] = uint8_t(value >> (8 * i));
}

Status ForCommId(uint64_t comm_id, std::string* socket_name) {
  if (comm_id == 0) return Status::Error(EINVAL, "comm id 0");
  *socket_name = CmSocketName(kCmProcessPortSpace, CommIdSocketNumber(uint32_t(comm_id)));
  return Status::Ok();
}

}  // namespace

std::string CmSocketName(uint16_t port_space, uint16_t port) {
  const Config& config = GetConfig();
  char buf[160];
  if (config.shm_namespace.empty()) {
    std::snprintf(buf, sizeof(buf), "softrdma-cm-%04x-%u", unsigned(port_space), unsigned(port));
  } else {
    std::snprintf(buf, sizeof(buf), "softrdma-%s-cm-%04x-%u", config.shm_namespace.c_str(),
                  unsigned(port_space), unsigned(port));
  }
  return buf;
}

Status CmSocketForMad(std::span<const uint8_t> mad, std::string* socket_name) {
  if (mad.size() != kGsiMadSize || mad[kBaseVersionOffset] != kMadBaseVersion ||
      mad[kMgmtClassOffset] != kMgmtClassCm) {
    return Status::Error(EBADMSG, "not a CM MAD");
  }
  switch (uint16_t(LoadBe(mad, kAttributeIdOffset, 2))) {
    case kAttrReq:
    case kAttrSidrReq: {
      uint64_t service_id = LoadBe(mad, kServiceIdOffset, 8);
      *socket_name = CmSocketName(uint16_t(service_id >> 16), uint16_t(service_id));
      return Status::Ok();
    }
    case kAttrSidrRep:
      return ForCommId(LoadBe(mad, kRequestIdOffset, 4), socket_name);
    case kAttrMra:
    case kAttrRej:
    case kAttrRep:
    case kAttrRtu:
    case kAttrDreq:
    case kAttrDrep:
      return ForCommId(LoadBe(mad, kRemoteCommIdOffset, 4), socket_name);
    default:
      return Status::Error(EPROTONOSUPPORT, "CM attribute not routed");
  }
}

bool NoListenerAnswer(std::span<const uint8_t> request, std::span<uint8_t, kGsiMadSize> answer) {
  if (request.size() != kGsiMadSize || request[kBaseVersionOffset] != kMadBaseVersion ||
      request[kMgmtClassOffset] != kMgmtClassCm) {
    return false;
  }
  const uint16_t attr = uint16_t(LoadBe(request, kAttributeIdOffset, 2));
  if (attr != kAttrReq && attr != kAttrSidrReq) return false;
  std::fill(answer.begin(), answer.end(), uint8_t{0});
  // The MAD header as the request's (base version, class, class version,
  // method Send, transaction id); only the attribute differs.
  std::copy_n(request.begin(), kMessageOffset, answer.begin());
  const uint32_t their_id = uint32_t(LoadBe(request, kMessageOffset, 4));
  if (attr == kAttrReq) {
    StoreBe(answer, kAttributeIdOffset, 2, kAttrRej);
    StoreBe(answer, kRemoteCommIdOffset, 4, their_id);  // local comm id stays 0
    answer[kMessageOffset + 8] = 0;                     // message REJected: REQ
    StoreBe(answer, kMessageOffset + 10, 2, kRejInvalidServiceId);
  } else {
    StoreBe(answer, kAttributeIdOffset, 2, kAttrSidrRep);
    StoreBe(answer, kRequestIdOffset, 4, their_id);
    answer[kMessageOffset + 4] = kSidrServiceIdNotSupported;
    std::copy_n(request.begin() + kServiceIdOffset, 8, answer.begin() + kMessageOffset + 12);
  }
  return true;
}

void EncodeGsiEnvelope(const GsiEnvelope& envelope, std::span<const uint8_t, kGsiMadSize> mad,
                       std::span<uint8_t, kGsiEnvelopeSize> out) {
  std::memset(out.data(), 0, kGsiEnvelopeHeaderSize);
  std::memcpy(out.data(), kEnvelopeMagic, sizeof(kEnvelopeMagic));
  std::memcpy(out.data() + 8, envelope.remote_gid.data(), 16);
  std::memcpy(out.data() + 24, envelope.local_gid.data(), 16);
  StoreBe(out, 40, 4, envelope.remote_qpn);
  StoreBe(out, 44, 2, envelope.pkey);
  std::memcpy(out.data() + kGsiEnvelopeHeaderSize, mad.data(), kGsiMadSize);
}

bool DecodeGsiEnvelope(std::span<const uint8_t> bytes, GsiEnvelope* envelope,
                       std::span<const uint8_t>* mad) {
  if (bytes.size() != kGsiEnvelopeSize) return false;
  if (std::memcmp(bytes.data(), kEnvelopeMagic, sizeof(kEnvelopeMagic)) != 0) return false;
  std::memcpy(envelope->remote_gid.data(), bytes.data() + 8, 16);
  std::memcpy(envelope->local_gid.data(), bytes.data() + 24, 16);
  envelope->remote_qpn = uint32_t(LoadBe(bytes, 40, 4));
  envelope->pkey = uint16_t(LoadBe(bytes, 44, 2));
  *mad = bytes.subspan(kGsiEnvelopeHeaderSize, kGsiMadSize);
  return true;
}

}  // namespace softrdma
