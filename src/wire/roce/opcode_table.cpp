// The opcode table (see opcode_table.h). Each row names its headers, payload
// rule and position once; every other property (request or response, AckReq
// rule, receive WQE use, header length) is derived from those by the same
// rules for all rows, so one typo cannot make two properties disagree. The
// compile-time checks at the end pin the rows against roce-wire.md §3.
#include "wire/roce/opcode_table.h"

#include <array>

namespace softrdma::roce {
namespace {

constexpr std::array<size_t, kHeaderKinds> kHeaderSizes = {
    kRdethSize, kDethSize, kFethSize, kRethSize,         kAtomicEthSize,
    kImmDtSize, kIethSize, kAethSize, kAtomicAckEthSize, kCnpReservedSize,
};
constexpr std::array<const char*, kHeaderKinds> kHeaderNames = {
    "RDETH", "DETH", "FETH", "RETH", "AtomicETH", "ImmDt", "IETH", "AETH", "AtomicAckETH", "CNP",
};

constexpr unsigned IndexOf(HeaderBit bit) {
  unsigned i = 0;
  while (i < kHeaderKinds && (1u << i) != unsigned(bit)) ++i;
  return i;
}

constexpr uint8_t HeaderLengthOf(uint16_t headers) {
  size_t length = kBthSize;
  for (unsigned i = 0; i < kHeaderKinds; ++i) {
    if (headers & (1u << i)) length += kHeaderSizes[i];
  }
  return uint8_t(length);
}

constexpr bool IsResponse(Operation op) {
  return op == Operation::kRdmaReadResponse || op == Operation::kAcknowledge ||
         op == Operation::kAtomicAcknowledge;
}

constexpr OpcodeInfo Row(uint8_t opcode, const char* name, Operation op, Position position,
                         uint16_t headers, PayloadRule payload) {
  const TransportService service = ServiceOf(opcode);
  const bool request = !IsResponse(op) && op != Operation::kCongestionNotification;
  const bool reliable = service == TransportService::kRc || service == TransportService::kRd;
  const bool send = op == Operation::kSend;
  const bool write_imm = op == Operation::kRdmaWrite && (headers & kImmDtBit) != 0;
  const bool first = position == Position::kFirst || position == Position::kOnly;
  const bool last = position == Position::kLast || position == Position::kOnly;
  return OpcodeInfo{
      .opcode = opcode,
      .name = name,
      .service = service,
      .operation = op,
      .position = position,
      .headers = headers,
      .payload = payload,
      .is_request = request,
      .ack_req = request && reliable ? AckReqRule::kOnEnd : AckReqRule::kNever,
      .takes_recv_wqe = (send && first) || write_imm,
      .completes_recv_wqe = (send && last) || write_imm,
      .header_length = HeaderLengthOf(headers),
  };
}

using enum Operation;
using enum PayloadRule;
constexpr Position kF = Position::kFirst;
constexpr Position kM = Position::kMiddle;
constexpr Position kL = Position::kLast;
constexpr Position kO = Position::kOnly;

// The SEND and RDMA WRITE rows are the same for RC, UC and RD but for the
// service bits and, on RD, the RDETH + DETH in front of every request.
#define SOFTRDMA_SEND_WRITE_ROWS(base, prefix, extra)                                            \
  Row(base | 0x00, prefix " SEND First", kSend, kF, extra, kFullMtu),                            \
      Row(base | 0x01, prefix " SEND Middle", kSend, kM, extra, kFullMtu),                       \
      Row(base | 0x02, prefix " SEND Last", kSend, kL, extra, kOneToMtu),                        \
      Row(base | 0x03, prefix " SEND Last with Immediate", kSend, kL, extra | kImmDtBit,         \
          kOneToMtu),                                                                            \
      Row(base | 0x04, prefix " SEND Only", kSend, kO, extra, kZeroToMtu),                       \
      Row(base | 0x05, prefix " SEND Only with Immediate", kSend, kO, extra | kImmDtBit,         \
          kZeroToMtu),                                                                           \
      Row(base | 0x06, prefix " RDMA WRITE First", kRdmaWrite, kF, extra | kRethBit, kFullMtu),  \
      Row(base | 0x07, prefix " RDMA WRITE Middle", kRdmaWrite, kM, extra, kFullMtu),            \
      Row(base | 0x08, prefix " RDMA WRITE Last", kRdmaWrite, kL, extra, kOneToMtu),             \
      Row(base | 0x09, prefix " RDMA WRITE Last with Immediate", kRdmaWrite, kL,                 \
          extra | kImmDtBit, kOneToMtu),                                                         \
      Row(base | 0x0A, prefix " RDMA WRITE Only", kRdmaWrite, kO, extra | kRethBit, kZeroToMtu), \
      Row(base | 0x0B, prefix " RDMA WRITE Only with Immediate", kRdmaWrite, kO,                 \
          extra | kRethBit | kImmDtBit, kZeroToMtu)

// READ responses, ACKs and atomics of the reliable services; `extra` is the
// RDETH on RD responses and `req_extra` the RDETH + DETH on RD requests.
#define SOFTRDMA_READ_ATOMIC_ROWS(base, prefix, extra, req_extra)                                  \
  Row(base | 0x0C, prefix " RDMA READ Request", kRdmaReadRequest, kO, req_extra | kRethBit,        \
      kNone),                                                                                      \
      Row(base | 0x0D, prefix " RDMA READ Response First", kRdmaReadResponse, kF,                  \
          extra | kAethBit, kFullMtu),                                                             \
      Row(base | 0x0E, prefix " RDMA READ Response Middle", kRdmaReadResponse, kM, extra,          \
          kFullMtu),                                                                               \
      Row(base | 0x0F, prefix " RDMA READ Response Last", kRdmaReadResponse, kL, extra | kAethBit, \
          kOneToMtu),                                                                              \
      Row(base | 0x10, prefix " RDMA READ Response Only", kRdmaReadResponse, kO, extra | kAethBit, \
          kZeroToMtu),                                                                             \
      Row(base | 0x11, prefix " Acknowledge", kAcknowledge, kO, extra | kAethBit, kNone),          \
      Row(base | 0x12, prefix " Atomic Acknowledge", kAtomicAcknowledge, kO,                       \
          extra | kAethBit | kAtomicAckEthBit, kNone),                                             \
      Row(base | 0x13, prefix " CmpSwap", kCompareSwap, kO, req_extra | kAtomicEthBit, kNone),     \
      Row(base | 0x14, prefix " FetchAdd", kFetchAdd, kO, req_extra | kAtomicEthBit, kNone)

constexpr uint16_t kRdRequest = kRdethBit | kDethBit;

constexpr OpcodeInfo kTable[] = {
    // RC (roce-wire.md §3.1)
    SOFTRDMA_SEND_WRITE_ROWS(0x00, "RC", 0),
    SOFTRDMA_READ_ATOMIC_ROWS(0x00, "RC", 0, 0),
    Row(0x16, "RC SEND Last with Invalidate", kSend, kL, kIethBit, kOneToMtu),
    Row(0x17, "RC SEND Only with Invalidate", kSend, kO, kIethBit, kZeroToMtu),
    Row(0x1C, "RC FLUSH", kFlush, kO, kFethBit | kRethBit, kNone),
    Row(0x1D, "RC ATOMIC WRITE", kAtomicWrite, kO, kRethBit, kExactly8),
    // UC (§3.2)
    SOFTRDMA_SEND_WRITE_ROWS(0x20, "UC", 0),
    // RD (§3.4): every request carries RDETH + DETH, every response RDETH.
    SOFTRDMA_SEND_WRITE_ROWS(0x40, "RD", kRdRequest),
    SOFTRDMA_READ_ATOMIC_ROWS(0x40, "RD", kRdethBit, kRdRequest),
    // UD (§3.3)
    Row(0x64, "UD SEND Only", kSend, kO, kDethBit, kZeroToMtu),
    Row(0x65, "UD SEND Only with Immediate", kSend, kO, kDethBit | kImmDtBit, kZeroToMtu),
    // CNP (§3.4): BECN set, 16 reserved bytes, no payload.
    Row(0x81, "CNP", kCongestionNotification, kO, kCnpReservedBit, kNone),
};

#undef SOFTRDMA_SEND_WRITE_ROWS
#undef SOFTRDMA_READ_ATOMIC_ROWS

constexpr bool SortedAndUnique() {
  for (size_t i = 1; i < std::size(kTable); ++i) {
    if (kTable[i - 1].opcode >= kTable[i].opcode) return false;
  }
  return true;
}
static_assert(SortedAndUnique(), "opcode table rows must be in strictly increasing order");

constexpr std::array<int16_t, 256> BuildIndex() {
  std::array<int16_t, 256> index{};
  index.fill(-1);
  for (size_t i = 0; i < std::size(kTable); ++i) index[kTable[i].opcode] = int16_t(i);
  return index;
}
constexpr std::array<int16_t, 256> kIndex = BuildIndex();

constexpr const OpcodeInfo& At(uint8_t opcode) {
  return kTable[kIndex[opcode]];
}

// Header lengths of roce-wire.md §3 (and rxe's table) for a sample of rows.
static_assert(std::size(kTable) == 25 + 12 + 21 + 2 + 1);
static_assert(At(0x04).header_length == 12);
static_assert(At(0x05).header_length == 16);
static_assert(At(0x06).header_length == 28);
static_assert(At(0x0B).header_length == 32);
static_assert(At(0x0C).header_length == 28);
static_assert(At(0x0E).header_length == 12);
static_assert(At(0x11).header_length == 16);
static_assert(At(0x12).header_length == 24);
static_assert(At(0x13).header_length == 40);
static_assert(At(0x17).header_length == 16);
static_assert(At(0x1C).header_length == 32);
static_assert(At(0x1D).header_length == 28);
static_assert(At(0x2B).header_length == 32);
static_assert(At(0x4B).header_length == 44);
static_assert(At(0x4E).header_length == 16);
static_assert(At(0x52).header_length == 28);
static_assert(At(0x54).header_length == 52);
static_assert(At(0x65).header_length == 24);
static_assert(At(0x81).header_length == 28);
static_assert(At(0x09).takes_recv_wqe && At(0x09).completes_recv_wqe);
static_assert(!At(0x08).takes_recv_wqe && !At(0x08).completes_recv_wqe);
static_assert(At(0x00).takes_recv_wqe && !At(0x00).completes_recv_wqe);
static_assert(!At(0x02).takes_recv_wqe && At(0x02).completes_recv_wqe);
static_assert(At(0x0C).ack_req == AckReqRule::kOnEnd && At(0x24).ack_req == AckReqRule::kNever);
static_assert(!At(0x11).is_request && !At(0x81).is_request && At(0x64).is_request);

}  // namespace

size_t OpcodeInfo::OffsetOf(HeaderBit bit) const {
  size_t offset = kBthSize;
  for (unsigned i = 0; i < IndexOf(bit); ++i) {
    if (headers & (1u << i)) offset += kHeaderSizes[i];
  }
  return offset;
}

const OpcodeInfo* FindOpcode(uint8_t opcode) {
  return kIndex[opcode] < 0 ? nullptr : &kTable[kIndex[opcode]];
}

std::span<const OpcodeInfo> AllOpcodes() {
  return kTable;
}

size_t HeaderSize(HeaderBit bit) {
  return kHeaderSizes[IndexOf(bit)];
}

const char* HeaderName(HeaderBit bit) {
  return kHeaderNames[IndexOf(bit)];
}

}  // namespace softrdma::roce
