// CM MAD codec (see mad_codec.h and docs/ib-cm.md §2, §3, §5.1).
//
// Every message is described once, by a field list (Codec<M>::Fields) that
// both directions walk: the Writer puts each field into the bytes, the Reader
// takes it out. So a position typed wrong is wrong the same way for encode and
// decode (the byte-exact tests catch it) instead of silently disagreeing, and
// a compile-time check proves that no two fields of a message overlap and that
// every field lies inside the 232-byte message.
#include "cm/mad_codec.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "util/big_endian.h"

namespace softrdma::cm {
namespace {

inline constexpr size_t kCmMessageSize = kMadSize - kMadHeaderSize;  // 232

// A field `width` bits wide that starts `bit` bits below the most significant
// bit of byte `byte` (bit 0 = MSB, the numbering of ib-cm.md and of the
// kernel's IBA_FIELD_BLOC). It may straddle bytes (the REQ's 20-bit flow
// label does); bit + width <= 64. Whole bytes and big-endian 16/24/32/64-bit
// numbers are the special case bit = 0, width = 8 * n.
struct Field {
  size_t byte;
  unsigned bit;
  unsigned width;
};

constexpr size_t BytesSpanned(Field f) {
  return (f.bit + f.width + 7) / 8;
}
constexpr uint64_t Mask(unsigned width) {
  return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}
// How far the field's least significant bit sits above bit 0 of the last byte.
constexpr unsigned ShiftOf(Field f) {
  return unsigned(BytesSpanned(f) * 8) - f.bit - f.width;
}

constexpr uint64_t GetField(std::span<const uint8_t> buf, Field f) {
  return (LoadBe(buf, f.byte, BytesSpanned(f)) >> ShiftOf(f)) & Mask(f.width);
}
// Read-modify-write, so that the other fields sharing the bytes stay intact.
constexpr void PutField(std::span<uint8_t> buf, Field f, uint64_t value) {
  const size_t n = BytesSpanned(f);
  const uint64_t mask = Mask(f.width) << ShiftOf(f);
  const uint64_t old = LoadBe(buf, f.byte, n);
  StoreBe(buf, f.byte, n, (old & ~mask) | ((value << ShiftOf(f)) & mask));
}

// Message fields are bools, enums and unsigned integers.
template <typename T>
constexpr uint64_t ToRaw(T v) {
  if constexpr (std::is_enum_v<T>) {
    return uint64_t(static_cast<std::underlying_type_t<T>>(v));
  } else {
    return uint64_t(v);
  }
}
template <typename T>
constexpr T FromRaw(uint64_t raw) {
  if constexpr (std::is_enum_v<T>) {
    // The enums have a fixed underlying type, so a value the enum does not
    // name (e.g. transport 2) is kept as is rather than being undefined.
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(raw));
  } else if constexpr (std::is_same_v<T, bool>) {
    return raw != 0;
  } else {
    return static_cast<T>(raw);
  }
}

// The two walkers of a field list. Scalar() maps a whole member to a field;
// Part() maps bits [shift, shift + width) of a member to a field, for values
// split over several places (REP and SIDR_REP vendor IDs); Bytes() maps an
// array member to the bytes at an offset.
class Writer {
 public:
  explicit constexpr Writer(std::span<uint8_t> out) : out_(out) {}
  template <typename T>
  constexpr void Scalar(const T& v, Field f) {
    PutField(out_, f, ToRaw(v));
  }
  template <typename T>
  constexpr void Part(const T& v, unsigned shift, Field f) {
    PutField(out_, f, ToRaw(v) >> shift);
  }
  template <size_t N>
  constexpr void Bytes(const std::array<uint8_t, N>& a, size_t offset) {
    std::copy(a.begin(), a.end(), out_.begin() + offset);
  }

 private:
  std::span<uint8_t> out_;
};

class Reader {
 public:
  explicit constexpr Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  constexpr void Scalar(T& v, Field f) {
    v = FromRaw<T>(GetField(in_, f));
  }
  template <typename T>
  constexpr void Part(T& v, unsigned shift, Field f) {
    const uint64_t mask = Mask(f.width) << shift;
    v = FromRaw<T>((ToRaw(v) & ~mask) | (GetField(in_, f) << shift));
  }
  template <size_t N>
  constexpr void Bytes(std::array<uint8_t, N>& a, size_t offset) {
    std::copy_n(in_.begin() + offset, N, a.begin());
  }

 private:
  std::span<const uint8_t> in_;
};

// Walks a field list at compile time and records which bits it claims; used
// only by the static_asserts below.
class LayoutChecker {
 public:
  template <typename T>
  constexpr void Scalar(const T&, Field f) {
    ClaimScalar(f);
  }
  template <typename T>
  constexpr void Part(const T&, unsigned shift, Field f) {
    if (shift + f.width > sizeof(T) * 8) ok_ = false;
    ClaimScalar(f);
  }
  template <size_t N>
  constexpr void Bytes(const std::array<uint8_t, N>&, size_t offset) {
    Claim(offset * 8, N * 8);
  }
  constexpr bool ok() const { return ok_; }

 private:
  // GetField/PutField handle at most 8 bytes, starting inside the first one.
  constexpr void ClaimScalar(Field f) {
    if (f.width == 0 || f.bit > 7 || f.bit + f.width > 64) ok_ = false;
    Claim(f.byte * 8 + f.bit, f.width);
  }
  constexpr void Claim(size_t first_bit, size_t width) {
    if (first_bit + width > kCmMessageSize * 8) {
      ok_ = false;
      return;
    }
    for (size_t b = first_bit; b < first_bit + width; ++b) {
      if (used_[b]) ok_ = false;
      used_[b] = true;
    }
  }
  std::array<bool, kCmMessageSize * 8> used_{};
  bool ok_ = true;
};

// ---- The message layouts (ib-cm.md §3; offsets relative to MAD byte 24) ----

template <typename Msg>
struct Codec;

template <>
struct Codec<ReqMsg> {  // §3.1
  static constexpr CmAttrId kAttr = CmAttrId::kReq;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.vendor_id, {5, 0, 24});
    io.Scalar(m.service_id, {8, 0, 64});
    io.Scalar(m.local_ca_guid, {16, 0, 64});
    io.Scalar(m.local_qkey, {28, 0, 32});
    io.Scalar(m.local_qpn, {32, 0, 24});
    io.Scalar(m.responder_resources, {35, 0, 8});
    io.Scalar(m.local_eecn, {36, 0, 24});
    io.Scalar(m.initiator_depth, {39, 0, 8});
    io.Scalar(m.remote_eecn, {40, 0, 24});
    io.Scalar(m.remote_cm_response_timeout, {43, 0, 5});
    io.Scalar(m.transport, {43, 5, 2});
    io.Scalar(m.flow_control, {43, 7, 1});
    io.Scalar(m.starting_psn, {44, 0, 24});
    io.Scalar(m.local_cm_response_timeout, {47, 0, 5});
    io.Scalar(m.retry_count, {47, 5, 3});
    io.Scalar(m.pkey, {48, 0, 16});
    io.Scalar(m.path_mtu, {50, 0, 4});
    io.Scalar(m.rdc_exists, {50, 4, 1});
    io.Scalar(m.rnr_retry_count, {50, 5, 3});
    io.Scalar(m.max_cm_retries, {51, 0, 4});
    io.Scalar(m.srq, {51, 4, 1});
    io.Scalar(m.extended_transport, {51, 5, 3});
    io.Scalar(m.primary_local_lid, {52, 0, 16});
    io.Scalar(m.primary_remote_lid, {54, 0, 16});
    io.Bytes(m.primary_local_gid, 56);
    io.Bytes(m.primary_remote_gid, 72);
    io.Scalar(m.primary_flow_label, {88, 0, 20});
    io.Scalar(m.primary_packet_rate, {91, 2, 6});
    io.Scalar(m.primary_traffic_class, {92, 0, 8});
    io.Scalar(m.primary_hop_limit, {93, 0, 8});
    io.Scalar(m.primary_sl, {94, 0, 4});
    io.Scalar(m.primary_subnet_local, {94, 4, 1});
    io.Scalar(m.primary_local_ack_timeout, {95, 0, 5});
    // 96-139: alternate path, left zero (no alternate paths on RoCE).
    io.Bytes(m.private_data, 140);
  }
};

template <>
struct Codec<RepMsg> {  // §3.2
  static constexpr CmAttrId kAttr = CmAttrId::kRep;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Scalar(m.local_qkey, {8, 0, 32});
    io.Scalar(m.local_qpn, {12, 0, 24});
    io.Part(m.vendor_id, 16, {15, 0, 8});
    io.Scalar(m.local_eecn, {16, 0, 24});
    io.Part(m.vendor_id, 8, {19, 0, 8});
    io.Scalar(m.starting_psn, {20, 0, 24});
    io.Part(m.vendor_id, 0, {23, 0, 8});
    io.Scalar(m.responder_resources, {24, 0, 8});
    io.Scalar(m.initiator_depth, {25, 0, 8});
    io.Scalar(m.target_ack_delay, {26, 0, 5});
    io.Scalar(m.failover_accepted, {26, 5, 2});
    io.Scalar(m.flow_control, {26, 7, 1});
    io.Scalar(m.rnr_retry_count, {27, 0, 3});
    io.Scalar(m.srq, {27, 3, 1});
    io.Scalar(m.local_ca_guid, {28, 0, 64});
    io.Bytes(m.private_data, 36);
  }
};

template <>
struct Codec<RtuMsg> {  // §3.3
  static constexpr CmAttrId kAttr = CmAttrId::kRtu;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Bytes(m.private_data, 8);
  }
};

template <>
struct Codec<RejMsg> {  // §3.3
  static constexpr CmAttrId kAttr = CmAttrId::kRej;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Scalar(m.message_rejected, {8, 0, 2});
    io.Scalar(m.ari_length, {9, 0, 7});
    io.Scalar(m.reason, {10, 0, 16});
    io.Bytes(m.ari, 12);
    io.Bytes(m.private_data, 84);
  }
};

template <>
struct Codec<MraMsg> {  // §3.3
  static constexpr CmAttrId kAttr = CmAttrId::kMra;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Scalar(m.message_mraed, {8, 0, 2});
    io.Scalar(m.service_timeout, {9, 0, 5});
    io.Bytes(m.private_data, 10);
  }
};

template <>
struct Codec<DreqMsg> {  // §3.3
  static constexpr CmAttrId kAttr = CmAttrId::kDreq;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Scalar(m.remote_qpn, {8, 0, 24});
    io.Bytes(m.private_data, 12);
  }
};

template <>
struct Codec<DrepMsg> {  // §3.3
  static constexpr CmAttrId kAttr = CmAttrId::kDrep;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.local_comm_id, {0, 0, 32});
    io.Scalar(m.remote_comm_id, {4, 0, 32});
    io.Bytes(m.private_data, 8);
  }
};

template <>
struct Codec<SidrReqMsg> {  // §3.4
  static constexpr CmAttrId kAttr = CmAttrId::kSidrReq;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.request_id, {0, 0, 32});
    io.Scalar(m.pkey, {4, 0, 16});
    io.Scalar(m.service_id, {8, 0, 64});
    io.Bytes(m.private_data, 16);
  }
};

template <>
struct Codec<SidrRepMsg> {  // §3.4
  static constexpr CmAttrId kAttr = CmAttrId::kSidrRep;
  template <typename Io, typename M>
  static constexpr void Fields(Io& io, M& m) {
    io.Scalar(m.request_id, {0, 0, 32});
    io.Scalar(m.status, {4, 0, 8});
    io.Scalar(m.info_length, {5, 0, 8});
    // Bytes 6-7 are one 16-bit field in which Linux stores vendor ID bits
    // 15-8 zero-extended: byte 6 stays zero, byte 7 carries them.
    io.Part(m.vendor_id, 8, {7, 0, 8});
    io.Scalar(m.qpn, {8, 0, 24});
    io.Part(m.vendor_id, 0, {11, 0, 8});
    io.Scalar(m.service_id, {12, 0, 64});
    io.Scalar(m.qkey, {20, 0, 32});
    io.Bytes(m.info, 24);
    io.Bytes(m.private_data, 96);
  }
};

template <typename Msg>
constexpr bool LayoutIsSound() {
  LayoutChecker checker;
  const Msg msg{};
  Codec<Msg>::Fields(checker, msg);
  return checker.ok();
}

// Every alternative of CmMessage has a sound layout.
template <size_t... I>
constexpr bool AllLayoutsAreSound(std::index_sequence<I...>) {
  return (LayoutIsSound<std::variant_alternative_t<I, CmMessage>>() && ...);
}
static_assert(AllLayoutsAreSound(std::make_index_sequence<std::variant_size_v<CmMessage>>()),
              "a CM message field overlaps another one or lies outside the 232 bytes");

// ---- MAD common header (ib-cm.md §2; offsets from MAD byte 0) ----

inline constexpr Field kBaseVersionField{0, 0, 8};
inline constexpr Field kMgmtClassField{1, 0, 8};
inline constexpr Field kClassVersionField{2, 0, 8};
inline constexpr Field kMethodField{3, 0, 8};  // R bit + method: Send is 0x03 with R = 0
inline constexpr Field kTransactionIdField{8, 0, 64};
inline constexpr Field kAttributeIdField{16, 0, 16};
inline constexpr Field kAttributeModifierField{20, 0, 32};

// Decodes the message of the alternative whose attribute id is `attr`;
// nullopt when no alternative has it.
template <size_t... I>
std::optional<CmMessage> DecodeMessage(uint16_t attr, std::span<const uint8_t> body,
                                       std::index_sequence<I...>) {
  std::optional<CmMessage> out;
  auto try_one = [&]<size_t K>(std::integral_constant<size_t, K>) {
    using Msg = std::variant_alternative_t<K, CmMessage>;
    if (attr != ToRaw(Codec<Msg>::kAttr)) return false;
    Msg msg{};
    Reader reader(body);
    Codec<Msg>::Fields(reader, msg);
    out.emplace(std::in_place_index<K>, msg);
    return true;
  };
  (void)(try_one(std::integral_constant<size_t, I>{}) || ...);
  return out;
}

std::optional<Mad> Fail(DecodeError reason, DecodeError* error) {
  if (error != nullptr) *error = reason;
  return std::nullopt;
}

// rdma_cm IP header (ib-cm.md §5.1; offsets from the start of private data).
inline constexpr Field kCmaVersionField{0, 0, 8};
inline constexpr Field kCmaIpVersionField{1, 0, 4};
inline constexpr Field kCmaSrcPortField{2, 0, 16};
inline constexpr size_t kCmaSrcIpOffset = 4;
inline constexpr size_t kCmaDstIpOffset = 20;
// An IPv4 address occupies the last 4 of the 16 address bytes.
inline constexpr size_t kIpv4InAddress = 12;

void PutCmaAddress(std::span<uint8_t> out, size_t offset, const std::array<uint8_t, 16>& ip,
                   bool ipv4) {
  const size_t from = ipv4 ? kIpv4InAddress : 0;
  std::fill_n(out.begin() + offset, 16, uint8_t{0});
  std::copy(ip.begin() + from, ip.end(), out.begin() + offset + from);
}

std::array<uint8_t, 16> GetCmaAddress(std::span<const uint8_t> in, size_t offset, bool ipv4) {
  std::array<uint8_t, 16> ip{};
  const size_t from = ipv4 ? kIpv4InAddress : 0;
  std::copy(in.begin() + offset + from, in.begin() + offset + 16, ip.begin() + from);
  return ip;
}

}  // namespace

const char* DecodeErrorName(DecodeError error) {
  switch (error) {
    case DecodeError::kWrongSize:
      return "wrong_size";
    case DecodeError::kBadBaseVersion:
      return "bad_base_version";
    case DecodeError::kNotCmClass:
      return "not_cm_class";
    case DecodeError::kBadClassVersion:
      return "bad_class_version";
    case DecodeError::kBadMethod:
      return "bad_method";
    case DecodeError::kUnknownAttribute:
      return "unknown_attribute";
  }
  return "unknown_error";
}

CmAttrId AttributeOf(const CmMessage& message) {
  return std::visit([]<typename Msg>(const Msg&) { return Codec<Msg>::kAttr; }, message);
}

void EncodeMad(const Mad& mad, std::span<uint8_t, kMadSize> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  PutField(out, kBaseVersionField, kMadBaseVersion);
  PutField(out, kMgmtClassField, kMgmtClassCm);
  PutField(out, kClassVersionField, kCmClassVersion);
  PutField(out, kMethodField, kMadMethodSend);
  PutField(out, kTransactionIdField, mad.transaction_id);
  PutField(out, kAttributeIdField, ToRaw(AttributeOf(mad.message)));
  PutField(out, kAttributeModifierField, mad.attribute_modifier);
  Writer writer(std::span<uint8_t>(out).subspan(kMadHeaderSize));
  std::visit([&]<typename Msg>(const Msg& msg) { Codec<Msg>::Fields(writer, msg); }, mad.message);
}

std::optional<Mad> DecodeMad(std::span<const uint8_t> bytes, DecodeError* error) {
  // The checks follow the header's byte order, so the first wrong byte names
  // the error.
  if (bytes.size() != kMadSize) return Fail(DecodeError::kWrongSize, error);
  if (GetField(bytes, kBaseVersionField) != kMadBaseVersion) {
    return Fail(DecodeError::kBadBaseVersion, error);
  }
  if (GetField(bytes, kMgmtClassField) != kMgmtClassCm) {
    return Fail(DecodeError::kNotCmClass, error);
  }
  if (GetField(bytes, kClassVersionField) != kCmClassVersion) {
    return Fail(DecodeError::kBadClassVersion, error);
  }
  // A set R bit (a response method) is refused too: CM messages are all Send.
  if (GetField(bytes, kMethodField) != kMadMethodSend) return Fail(DecodeError::kBadMethod, error);
  std::optional<CmMessage> message =
      DecodeMessage(uint16_t(GetField(bytes, kAttributeIdField)), bytes.subspan(kMadHeaderSize),
                    std::make_index_sequence<std::variant_size_v<CmMessage>>());
  if (!message) return Fail(DecodeError::kUnknownAttribute, error);
  return Mad{
      .transaction_id = GetField(bytes, kTransactionIdField),
      .attribute_modifier = uint32_t(GetField(bytes, kAttributeModifierField)),
      .message = std::move(*message),
  };
}

void EncodeCmaHeader(const CmaHeader& header, std::span<uint8_t, kCmaHeaderSize> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  const bool ipv4 = header.ip_version == 4;
  PutField(out, kCmaVersionField, 0);
  PutField(out, kCmaIpVersionField, header.ip_version);
  PutField(out, kCmaSrcPortField, header.src_port);
  PutCmaAddress(out, kCmaSrcIpOffset, header.src_ip, ipv4);
  PutCmaAddress(out, kCmaDstIpOffset, header.dst_ip, ipv4);
}

std::optional<CmaHeader> DecodeCmaHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < kCmaHeaderSize) return std::nullopt;
  // Linux writes the whole byte as CMA_VERSION 0x00 and refuses anything else.
  if (GetField(bytes, kCmaVersionField) != 0) return std::nullopt;
  const auto ip_version = uint8_t(GetField(bytes, kCmaIpVersionField));
  if (ip_version != 4 && ip_version != 6) return std::nullopt;
  const bool ipv4 = ip_version == 4;
  return CmaHeader{
      .ip_version = ip_version,
      .src_port = uint16_t(GetField(bytes, kCmaSrcPortField)),
      .src_ip = GetCmaAddress(bytes, kCmaSrcIpOffset, ipv4),
      .dst_ip = GetCmaAddress(bytes, kCmaDstIpOffset, ipv4),
  };
}

}  // namespace softrdma::cm
