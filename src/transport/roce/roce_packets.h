// What the RoCE roles share about packets: the opcodes they send, the view
// of a received packet, and sending one packet of a QP through the
// engine's port (headers, payload, pad and ICRC in one datagram).
#pragma once

#include <cstdint>
#include <span>

#include <sys/uio.h>

#include "transport/roce/roce_qp.h"
#include "wire/roce/packet.h"

namespace softrdma::transport::roce {

using softrdma::roce::OpcodeInfo;
using softrdma::roce::TransportHeaders;

// RC opcodes (roce-wire.md §3); UC ones are these | 0x20 (SEND, WRITE only).
namespace opc {
inline constexpr uint8_t kSendFirst = 0x00;
inline constexpr uint8_t kSendMiddle = 0x01;
inline constexpr uint8_t kSendLast = 0x02;
inline constexpr uint8_t kSendLastImm = 0x03;
inline constexpr uint8_t kSendOnly = 0x04;
inline constexpr uint8_t kSendOnlyImm = 0x05;
inline constexpr uint8_t kWriteFirst = 0x06;
inline constexpr uint8_t kWriteMiddle = 0x07;
inline constexpr uint8_t kWriteLast = 0x08;
inline constexpr uint8_t kWriteLastImm = 0x09;
inline constexpr uint8_t kWriteOnly = 0x0A;
inline constexpr uint8_t kWriteOnlyImm = 0x0B;
inline constexpr uint8_t kReadRequest = 0x0C;
inline constexpr uint8_t kReadResponseFirst = 0x0D;
inline constexpr uint8_t kReadResponseMiddle = 0x0E;
inline constexpr uint8_t kReadResponseLast = 0x0F;
inline constexpr uint8_t kReadResponseOnly = 0x10;
inline constexpr uint8_t kAck = 0x11;
inline constexpr uint8_t kAtomicAck = 0x12;
inline constexpr uint8_t kCompareSwap = 0x13;
inline constexpr uint8_t kFetchAdd = 0x14;
inline constexpr uint8_t kSendLastInv = 0x16;
inline constexpr uint8_t kSendOnlyInv = 0x17;
inline constexpr uint8_t kUcBase = 0x20;
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
}  // namespace opc

// A received packet, checked by the codec and the ICRC.
struct PacketIn {
  const OpcodeInfo* info = nullptr;
  TransportHeaders h;
  std::span<const uint8_t> payload;
};

// Sends one packet of `qp`: `h` (PadCnt and TVer are filled in) and the
// payload gathered from `payload`. false: the port did not take it (full),
// counted; the caller treats it as lost or retries later.
bool SendPacket(Engine& engine, const RoceQp& rq, const TransportHeaders& h, const iovec* payload,
                int npayload, size_t payload_length);

// The same for any destination (UD: per WQE).
// The UDP source port of datagrams from local address `src` (sealed into the
// ICRC): 4791, or the port's own where another user holds 4791 there.
uint16_t SourcePortFor(Engine& engine, const softrdma::roce::Gid& src);
bool SendPacketTo(Engine& engine, const NetworkHeaders& net, const IpEndpoint& to,
                  const TransportHeaders& h, const iovec* payload, int npayload,
                  size_t payload_length);
// Counts (and says once) a datagram the port refused for good (EMSGSIZE,
// no route): it is lost, as a network would lose it; the sender's timer
// and retry count decide what follows, never a send queue blocked forever.
void CountSendError(int error, size_t bytes);
// A checked UD packet (roce_datagram.cpp).
void OnUdPacket(Engine& engine, const InDatagram& datagram, const softrdma::roce::PacketView& view);

// The ACK-type AETH syndrome the responder sends (credit code "invalid":
// no end-to-end credits, as rxe).
inline constexpr uint8_t kAckSyndrome = 0x1F;
// The repeat of a sequence NAK (roce_responder.cpp): an ACK of epsn - 1,
// which a requester of the standard takes for a stale duplicate and ignores,
// with credit code 30 (32768 credits, as unlimited as "invalid"), by which
// ours tells it from an ordinary duplicate ACK and takes it for the NAK.
inline constexpr uint8_t kNakRepeatSyndrome = 0x1E;

// Packets (and PSNs) a message of `length` bytes takes at `mtu`; at least one.
inline uint32_t PacketCount(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

// Responses this far before the oldest unacknowledged PSN are too old to be
// ours (a previous life of the connection): dropped.
inline constexpr int32_t kMaxStalePsns = 1 << 22;

// a - b in the 24-bit PSN space, as a signed distance.
inline int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

}  // namespace softrdma::transport::roce
