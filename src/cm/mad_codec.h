// The IB Communication Manager's messages (IBTA vol. 1 chapter 12) as 256-byte
// MADs, and the rdma_cm IP private-data header (Annex A11). Layouts and field
// meanings: shared docs/ib-cm.md, sections 2, 3 and 5. The same bytes travel
// on every wire (shm today, RoCEv2 QP1 later), so a peer that speaks the
// standard CM can read them.
//
// Decoding never trusts its input: a MAD of the wrong size, base version,
// class, class version or method, or an unknown attribute id, is refused with
// a reason (DecodeError) and the caller drops and counts it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>

namespace softrdma::cm {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHeaderSize = 24;
inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMadMethodSend = 0x03;

// Private-data capacities of each message (ib-cm.md §3).
inline constexpr size_t kReqPrivateDataSize = 92;
inline constexpr size_t kMraPrivateDataSize = 222;
inline constexpr size_t kRejPrivateDataSize = 148;
inline constexpr size_t kRejAriSize = 72;
inline constexpr size_t kRepPrivateDataSize = 196;
inline constexpr size_t kRtuPrivateDataSize = 224;
inline constexpr size_t kDreqPrivateDataSize = 220;
inline constexpr size_t kDrepPrivateDataSize = 224;
inline constexpr size_t kSidrReqPrivateDataSize = 216;
inline constexpr size_t kSidrRepPrivateDataSize = 136;
inline constexpr size_t kSidrRepInfoSize = 72;

enum class CmAttrId : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
};

// Transport Service Type of a REQ (byte 43 bits 5-6).
enum class CmTransport : uint8_t { kRc = 0, kUc = 1, kXrc = 3 };

using Gid = std::array<uint8_t, 16>;

struct ReqMsg {
  uint32_t local_comm_id = 0;
  uint32_t vendor_id = 0;  // 24 bits (ECE)
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;  // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;                // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  CmTransport transport = CmTransport::kRc;
  bool flow_control = false;
  uint32_t starting_psn = 0;              // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;  // 4 bits, IB MTU enum
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;  // 3 bits
  uint16_t primary_local_lid = 0;
  uint16_t primary_remote_lid = 0;
  Gid primary_local_gid{};
  Gid primary_remote_gid{};
  uint32_t primary_flow_label = 0;  // 20 bits
  uint8_t primary_packet_rate = 0;  // 6 bits
  uint8_t primary_traffic_class = 0;
  uint8_t primary_hop_limit = 0;
  uint8_t primary_sl = 0;  // 4 bits
  bool primary_subnet_local = false;
  uint8_t primary_local_ack_timeout = 0;  // 5 bits
  // The alternate path (bytes 96-139) is all zero on RoCE: encoded as zero,
  // ignored on decode.
  std::array<uint8_t, kReqPrivateDataSize> private_data{};

  bool operator==(const ReqMsg&) const = default;
};

struct RepMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;     // 24 bits
  uint32_t vendor_id = 0;     // 24 bits, split over bytes 15, 19, 23
  uint32_t local_eecn = 0;    // 24 bits
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateDataSize> private_data{};

  bool operator==(const RepMsg&) const = default;
};

struct RtuMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateDataSize> private_data{};

  bool operator==(const RtuMsg&) const = default;
};

// What a REJ or MRA refers to (2 bits).
enum class CmMessageKind : uint8_t { kReq = 0, kRep = 1, kOther = 2 };

struct RejMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMessageKind message_rejected = CmMessageKind::kReq;
  uint8_t ari_length = 0;  // 7 bits
  uint16_t reason = 0;
  std::array<uint8_t, kRejAriSize> ari{};
  std::array<uint8_t, kRejPrivateDataSize> private_data{};

  bool operator==(const RejMsg&) const = default;
};

struct MraMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMessageKind message_mraed = CmMessageKind::kReq;
  uint8_t service_timeout = 0;  // 5 bits
  std::array<uint8_t, kMraPrivateDataSize> private_data{};

  bool operator==(const MraMsg&) const = default;
};

struct DreqMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits
  std::array<uint8_t, kDreqPrivateDataSize> private_data{};

  bool operator==(const DreqMsg&) const = default;
};

struct DrepMsg {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateDataSize> private_data{};

  bool operator==(const DrepMsg&) const = default;
};

struct SidrReqMsg {
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateDataSize> private_data{};

  bool operator==(const SidrReqMsg&) const = default;
};

struct SidrRepMsg {
  uint32_t request_id = 0;
  uint8_t status = 0;
  uint8_t info_length = 0;
  // 16 bits used (ECE): bits 15-8 in byte 7 (bytes 6-7 are one 16-bit field
  // holding them zero-extended), bits 7-0 in byte 11.
  uint32_t vendor_id = 0;
  uint32_t qpn = 0;  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoSize> info{};
  std::array<uint8_t, kSidrRepPrivateDataSize> private_data{};

  bool operator==(const SidrRepMsg&) const = default;
};

using CmMessage =
    std::variant<ReqMsg, RepMsg, RtuMsg, RejMsg, MraMsg, DreqMsg, DrepMsg, SidrReqMsg, SidrRepMsg>;

struct Mad {
  uint64_t transaction_id = 0;
  uint32_t attribute_modifier = 0;
  CmMessage message;

  bool operator==(const Mad&) const = default;
};

enum class DecodeError {
  kWrongSize,
  kBadBaseVersion,
  kNotCmClass,
  kBadClassVersion,
  kBadMethod,
  kUnknownAttribute,
};

// A short, stable name ("wrong_size", "bad_method", ...) for logs and the
// counters of dropped MADs.
const char* DecodeErrorName(DecodeError error);

CmAttrId AttributeOf(const CmMessage& message);

// Writes the 256-byte MAD: common header (base version 1, class 0x07, class
// version 2, method Send, status 0) and the message. Reserved bytes are zero.
// A value wider than its field (e.g. a QPN above 2^24) is cut to the
// field's width, never spilling into the neighbouring field.
void EncodeMad(const Mad& mad, std::span<uint8_t, kMadSize> out);

// Reads a MAD. Exactly kMadSize bytes are accepted. On failure returns
// nullopt and sets *error (when error is not null). Reserved bits and the
// REQ's alternate path are not checked (ignored), as Linux does.
std::optional<Mad> DecodeMad(std::span<const uint8_t> bytes, DecodeError* error = nullptr);

// ---- rdma_cm IP private-data header (ib-cm.md §5.1) ----

inline constexpr size_t kCmaHeaderSize = 36;
inline constexpr size_t kReqUserDataMax = kReqPrivateDataSize - kCmaHeaderSize;          // 56
inline constexpr size_t kSidrReqUserDataMax = kSidrReqPrivateDataSize - kCmaHeaderSize;  // 180

struct CmaHeader {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;   // host order
  // IPv6 address, or IPv4 in bytes 12-15 with bytes 0-11 zero on the wire
  // (encoding an IPv4 header writes only bytes 12-15, zeroing the pad).
  // Decoded IPv4 addresses come back in bytes 12-15 with the rest zero.
  std::array<uint8_t, 16> src_ip{};
  std::array<uint8_t, 16> dst_ip{};

  bool operator==(const CmaHeader&) const = default;
};

void EncodeCmaHeader(const CmaHeader& header, std::span<uint8_t, kCmaHeaderSize> out);
// Reads the first kCmaHeaderSize bytes of `bytes` (pass the whole private
// data). Refuses fewer than kCmaHeaderSize bytes, a version byte other than 0
// or an IP version other than 4 and 6. The pad of an IPv4 address is not
// checked (Linux ignores it too).
std::optional<CmaHeader> DecodeCmaHeader(std::span<const uint8_t> bytes);

// Service ID of (port space, port): ps << 16 | port with ps the RDMA_PS_*
// value, whose 0x0100 makes the 0x0000000001000000 IP CM prefix of ib-cm.md
// §5.2 (RDMA_PS_TCP 0x0106 -> 0x0000000001060000 | port).
inline uint64_t ServiceIdOf(uint16_t port_space, uint16_t port) {
  return (uint64_t{port_space} << 16) | port;
}
inline uint16_t PortOfServiceId(uint64_t service_id) {
  return uint16_t(service_id & 0xffff);
}
inline uint16_t PortSpaceOfServiceId(uint64_t service_id) {
  return uint16_t((service_id >> 16) & 0xffff);
}

}  // namespace softrdma::cm
