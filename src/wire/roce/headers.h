// The InfiniBand transport headers a RoCEv2 packet carries after the UDP
// header: the Base Transport Header and every extension header, as plain
// structs with host-order values, and their big-endian encodings. Layouts are
// roce-wire.md sections 2 and 4 (shared docs); which opcode carries which
// header is the opcode table's business (opcode_table.h).
//
// Encode writes every field exactly as given (reserved bits as 0); decode
// reads every field and ignores reserved bits. Each function takes a span of
// exactly the header's size, so a caller cannot hand it a short buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softrdma::roce {

inline constexpr size_t kBthSize = 12;
inline constexpr size_t kRdethSize = 4;
inline constexpr size_t kDethSize = 8;
inline constexpr size_t kFethSize = 4;
inline constexpr size_t kRethSize = 16;
inline constexpr size_t kAtomicEthSize = 28;
inline constexpr size_t kImmDtSize = 4;
inline constexpr size_t kIethSize = 4;
inline constexpr size_t kAethSize = 4;
inline constexpr size_t kAtomicAckEthSize = 8;
// A CNP (opcode 0x81) carries 16 reserved zero bytes after its BTH.
inline constexpr size_t kCnpReservedSize = 16;
inline constexpr size_t kIcrcSize = 4;

inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // Q_Key of every QP1 (GSI) datagram
inline constexpr uint32_t kPsnMask = 0xFFFFFF;    // PSNs, QPNs, MSNs and EECNs are 24 bits
inline constexpr uint32_t kMulticastQpn = 0xFFFFFF;

// Base Transport Header (12 bytes).
struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;  // SE
  bool mig_req = false;    // M: always 0 on RoCE (no APM), ignored on receive
  uint8_t pad_count = 0;   // 2 bits
  uint8_t tver = 0;        // 4 bits, must be 0
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;     // set in CNPs
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;  // A
  uint32_t psn = 0;      // 24 bits
  bool operator==(const Bth&) const = default;
};

// RDMA Extended Transport Header (16 bytes).
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;  // bytes of the whole (remaining) WRITE/READ message
  bool operator==(const Reth&) const = default;
};

// ACK Extended Transport Header (4 bytes): syndrome (rc-transport.md §5) and MSN.
struct Aeth {
  uint8_t syndrome = 0;  // 7 bits; bit 7 of the byte is reserved
  uint32_t msn = 0;      // 24 bits
  bool operator==(const Aeth&) const = default;
};

// Atomic Extended Transport Header (28 bytes, packed).
struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;  // CmpSwap: swap value; FetchAdd: the addend
  uint64_t compare = 0;   // CmpSwap: compare value; FetchAdd: 0
  bool operator==(const AtomicEth&) const = default;
};

// Atomic Acknowledge Extended Transport Header (8 bytes).
struct AtomicAckEth {
  uint64_t original = 0;  // the target's value before the atomic
  bool operator==(const AtomicAckEth&) const = default;
};

// Datagram Extended Transport Header (8 bytes).
struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits
  bool operator==(const Deth&) const = default;
};

// Reliable Datagram Extended Transport Header (4 bytes, RD only; unused on RoCE).
struct Rdeth {
  uint32_t eecn = 0;  // 24 bits
  bool operator==(const Rdeth&) const = default;
};

// FLUSH Extended Transport Header (4 bytes): two small fields in byte 3.
struct Feth {
  uint8_t selectivity = 0;  // bits 5-4 of byte 3
  uint8_t placement = 0;    // bits 3-0 of byte 3
  bool operator==(const Feth&) const = default;
};

void EncodeBth(const Bth& bth, std::span<uint8_t, kBthSize> out);
Bth DecodeBth(std::span<const uint8_t, kBthSize> in);

void EncodeReth(const Reth& reth, std::span<uint8_t, kRethSize> out);
Reth DecodeReth(std::span<const uint8_t, kRethSize> in);

void EncodeAeth(const Aeth& aeth, std::span<uint8_t, kAethSize> out);
Aeth DecodeAeth(std::span<const uint8_t, kAethSize> in);

void EncodeAtomicEth(const AtomicEth& eth, std::span<uint8_t, kAtomicEthSize> out);
AtomicEth DecodeAtomicEth(std::span<const uint8_t, kAtomicEthSize> in);

void EncodeAtomicAckEth(const AtomicAckEth& eth, std::span<uint8_t, kAtomicAckEthSize> out);
AtomicAckEth DecodeAtomicAckEth(std::span<const uint8_t, kAtomicAckEthSize> in);

void EncodeDeth(const Deth& deth, std::span<uint8_t, kDethSize> out);
Deth DecodeDeth(std::span<const uint8_t, kDethSize> in);

void EncodeRdeth(const Rdeth& rdeth, std::span<uint8_t, kRdethSize> out);
Rdeth DecodeRdeth(std::span<const uint8_t, kRdethSize> in);

void EncodeFeth(const Feth& feth, std::span<uint8_t, kFethSize> out);
Feth DecodeFeth(std::span<const uint8_t, kFethSize> in);

// ImmDt and IETH are one opaque big-endian 32-bit word each (immediate data;
// R_Key to invalidate). The value is the number the four bytes spell in
// network order: ibv_send_wr.imm_data / ibv_wc.imm_data (__be32) convert
// with be32toh / htobe32.
void EncodeWord32(uint32_t value, std::span<uint8_t, 4> out);
uint32_t DecodeWord32(std::span<const uint8_t, 4> in);

// AETH syndromes (rc-transport.md §5).
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
inline constexpr uint8_t kAckNoCredits = 0x1F;  // ACK, credit code 31 "invalid/unlimited"
inline constexpr uint8_t kNakPsnSequenceError = 0x60;
inline constexpr uint8_t kNakInvalidRequest = 0x61;
inline constexpr uint8_t kNakRemoteAccessError = 0x62;
inline constexpr uint8_t kNakRemoteOperationalError = 0x63;
inline constexpr uint8_t kNakInvalidRdRequest = 0x64;

constexpr AethType AethTypeOf(uint8_t syndrome) {
  return AethType((syndrome >> 5) & 0x3);
}
// The low five bits: credit code (ACK), RNR timer code (RNR NAK), NAK code.
constexpr uint8_t AethValueOf(uint8_t syndrome) {
  return syndrome & 0x1F;
}
constexpr uint8_t AckSyndrome(uint8_t credit_code) {
  return credit_code & 0x1F;
}
constexpr uint8_t RnrNakSyndrome(uint8_t rnr_timer_code) {
  return uint8_t(0x20 | (rnr_timer_code & 0x1F));
}

}  // namespace softrdma::roce
