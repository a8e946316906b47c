// The one description of every RoCEv2 opcode softrdma knows (roce-wire.md §3):
// which extension headers follow the BTH and in which order, whether and how
// much payload it may carry, where it sits in a message (first, middle, last,
// only), whether it is a request or a response, how AckReq applies, and
// whether it takes and completes a receive WQE. The encoder, the parser and
// (later) the transport all read this table; nothing else decides these
// questions.
//
// Known: RC 0x00-0x14, 0x16, 0x17, FLUSH 0x1C, ATOMIC WRITE 0x1D; UC
// 0x20-0x2B; RD 0x40-0x54 (parsed for completeness; RoCE has no RD QPs);
// UD 0x64, 0x65; CNP 0x81. Everything else (XRC 0xA0-0xB7, RD RESYNC 0x55,
// the reserved codes) is unknown and refused by the parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/roce/headers.h"

namespace softrdma::roce {

// Bits 7-5 of the opcode.
enum class TransportService : uint8_t {
  kRc = 0,
  kUc = 1,
  kRd = 2,
  kUd = 3,
  kCnp = 4,
  kXrc = 5,
};

// The headers that may follow the BTH. The bit order is the wire order
// (roce-wire.md §3: RDETH, DETH, FETH, RETH or AtomicETH, ImmDt or IETH; AETH,
// AtomicAckETH), so a header's offset is the sum of the sizes of the headers
// present below its bit.
enum HeaderBit : uint16_t {
  kRdethBit = 1u << 0,
  kDethBit = 1u << 1,
  kFethBit = 1u << 2,
  kRethBit = 1u << 3,
  kAtomicEthBit = 1u << 4,
  kImmDtBit = 1u << 5,
  kIethBit = 1u << 6,
  kAethBit = 1u << 7,
  kAtomicAckEthBit = 1u << 8,
  kCnpReservedBit = 1u << 9,
};
inline constexpr unsigned kHeaderKinds = 10;

// The operation a packet belongs to.
enum class Operation : uint8_t {
  kSend,
  kRdmaWrite,
  kRdmaReadRequest,
  kRdmaReadResponse,
  kAcknowledge,
  kAtomicAcknowledge,
  kCompareSwap,
  kFetchAdd,
  kFlush,
  kAtomicWrite,
  kCongestionNotification,
};

// Place in a message; kOnly is both first and last.
enum class Position : uint8_t { kFirst, kMiddle, kLast, kOnly };

// Payload a packet of this opcode may carry (roce-wire.md §3 and §5). The
// parser checks what it can without a QP (ParseTransport in packet.h);
// CheckPayloadForPathMtu applies the QP's path MTU.
enum class PayloadRule : uint8_t {
  kNone,       // no payload, no pad
  kFullMtu,    // FIRST / MIDDLE: exactly the path MTU
  kOneToMtu,   // LAST: 1..path MTU
  kZeroToMtu,  // ONLY: 0..path MTU
  kExactly8,   // ATOMIC WRITE: the 8-byte value
};

// How the AckReq bit applies (rc-transport.md §3.1).
enum class AckReqRule : uint8_t {
  kNever,  // UC, UD, responses, CNP: the bit is transmitted 0 and ignored
  kOnEnd,  // RC/RD requests: set on the last packet of every message (and
           // may be set on any packet, e.g. every 64th, to ask for an ACK)
};

struct OpcodeInfo {
  uint8_t opcode;
  const char* name;  // the InfiniBand name, e.g. "RC SEND Only"
  TransportService service;
  Operation operation;
  Position position;
  uint16_t headers;  // HeaderBit set
  PayloadRule payload;
  bool is_request;  // else a response (ACK, READ response, ATOMIC ACK) or a CNP
  AckReqRule ack_req;
  bool takes_recv_wqe;      // SEND FIRST/ONLY, WRITE-with-immediate LAST/ONLY: the
                            // responder needs a receive WQE (else RNR NAK on RC)
  bool completes_recv_wqe;  // SEND LAST/ONLY, WRITE-with-immediate LAST/ONLY: the
                            // packet that produces the receive completion
  uint8_t header_length;    // BTH plus every extension header, in bytes

  constexpr bool Has(HeaderBit bit) const { return (headers & bit) != 0; }
  constexpr bool IsFirstOfMessage() const {
    return position == Position::kFirst || position == Position::kOnly;
  }
  constexpr bool IsLastOfMessage() const {
    return position == Position::kLast || position == Position::kOnly;
  }
  constexpr bool CarriesPayload() const { return payload != PayloadRule::kNone; }
  // Offset of a present header from the start of the BTH.
  size_t OffsetOf(HeaderBit bit) const;
};

// The entry of an opcode, or nullptr when the opcode is unknown.
const OpcodeInfo* FindOpcode(uint8_t opcode);
// Every known opcode, in opcode order.
std::span<const OpcodeInfo> AllOpcodes();

// Size in bytes of one extension header kind.
size_t HeaderSize(HeaderBit bit);
const char* HeaderName(HeaderBit bit);

// The transport service an opcode's top three bits name.
constexpr TransportService ServiceOf(uint8_t opcode) {
  return TransportService(opcode >> 5);
}

}  // namespace softrdma::roce
