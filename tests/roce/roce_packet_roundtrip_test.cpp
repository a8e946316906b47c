// Every opcode of the table, encoded and parsed back over IPv4 and IPv6 with
// every payload length its rule allows from a set of edge lengths: headers,
// payload bytes, pad and ICRC survive, the length is what PacketLength says,
// and a change to any covered byte is caught by the parser.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "roce_samples.h"
#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace softrdma::roce {
namespace {

const size_t kLengths[] = {0, 1, 2, 3, 4, 5, 7, 8, 255, 256, 257, 1023, 1024, 4093, 4096, 4097};

bool Allowed(const OpcodeInfo& info, size_t length) {
  switch (info.payload) {
    case PayloadRule::kNone:
      return length == 0;
    case PayloadRule::kFullMtu:
      return length == 256 || length == 1024 || length == 4096;
    case PayloadRule::kOneToMtu:
      return length >= 1 && length <= 4096;
    case PayloadRule::kZeroToMtu:
      return length <= 4096;
    case PayloadRule::kExactly8:
      return length == 8;
  }
  return false;
}

TEST(RocePacketRoundTrip, EveryOpcodeEveryAllowedLengthBothIpVersions) {
  int checked = 0;
  for (const OpcodeInfo& info : AllOpcodes()) {
    for (uint8_t version : {uint8_t{4}, uint8_t{6}}) {
      for (size_t length : kLengths) {
        if (!Allowed(info, length)) continue;
        std::vector<uint8_t> payload(length);
        for (size_t i = 0; i < length; ++i) payload[i] = uint8_t(i * 7 + info.opcode);
        const TransportHeaders headers = samples::Headers(info, 0xFFFFF0 + uint32_t(length));
        const NetworkHeaders net = samples::Net(version);

        std::vector<uint8_t> packet(PacketLength(info, length));
        size_t written = 0;
        Status status = EncodePacket(net, headers, payload, packet, &written);
        ASSERT_TRUE(status.ok()) << info.name << " " << length << ": " << status.message();
        ASSERT_EQ(written, packet.size()) << info.name;
        EXPECT_EQ(packet.size() % 4, 0u) << info.name;

        PacketView view;
        status = ParsePacket(net, packet, &view);
        ASSERT_TRUE(status.ok()) << info.name << " " << length << ": " << status.message();
        EXPECT_EQ(view.info, &info);
        TransportHeaders expected = headers;
        expected.bth.pad_count = PadCount(length);
        EXPECT_EQ(view.headers, expected) << info.name << " " << length;
        EXPECT_EQ(std::vector<uint8_t>(view.payload.begin(), view.payload.end()), payload);
        EXPECT_EQ(view.payload.data(), packet.data() + info.header_length);
        EXPECT_TRUE(CheckPayloadForPathMtu(info, length, length < 256 ? 256 : length).ok() ||
                    info.payload == PayloadRule::kExactly8)
            << info.name;

        // The whole datagram parses back to the same network fields and packet.
        std::vector<uint8_t> datagram(NetworkHeaderLength(version) + packet.size());
        ASSERT_TRUE(EncodeDatagram(net, headers, payload, datagram, &written).ok());
        DatagramView dv;
        ASSERT_TRUE(ParseDatagram(datagram, &dv).ok()) << info.name;
        EXPECT_EQ(dv.net, net);
        EXPECT_EQ(std::vector<uint8_t>(dv.udp_payload.begin(), dv.udp_payload.end()), packet);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2 * 61);
}

// Any change to a byte the ICRC covers (everything but BTH byte 4) makes the
// packet fail to parse, whichever check notices first.
TEST(RocePacketRoundTrip, EveryCoveredByteIsProtected) {
  for (const OpcodeInfo& info : AllOpcodes()) {
    const size_t length = samples::PayloadLength(info, 256);
    std::vector<uint8_t> payload(length, 0x5A);
    std::vector<uint8_t> packet(PacketLength(info, length));
    size_t written = 0;
    const NetworkHeaders net = samples::Net(4);
    ASSERT_TRUE(EncodePacket(net, samples::Headers(info, 1), payload, packet, &written).ok());
    for (size_t i = 0; i < packet.size(); ++i) {
      std::vector<uint8_t> changed = packet;
      changed[i] ^= 0x01;
      PacketView view;
      const Status status = ParsePacket(net, changed, &view);
      if (i == 4) {
        EXPECT_TRUE(status.ok()) << info.name << ": FECN/BECN byte is masked";
      } else {
        EXPECT_FALSE(status.ok()) << info.name << " byte " << i;
      }
    }
  }
}

TEST(RocePacketRoundTrip, PathMtuRule) {
  const OpcodeInfo& first = *FindOpcode(0x00);
  const OpcodeInfo& last = *FindOpcode(0x02);
  const OpcodeInfo& only = *FindOpcode(0x04);
  const OpcodeInfo& ack = *FindOpcode(0x11);
  const OpcodeInfo& atomic_write = *FindOpcode(0x1D);
  EXPECT_TRUE(CheckPayloadForPathMtu(first, 1024, 1024).ok());
  EXPECT_EQ(CheckPayloadForPathMtu(first, 256, 1024).code(), EBADMSG);
  EXPECT_TRUE(CheckPayloadForPathMtu(last, 1, 1024).ok());
  EXPECT_EQ(CheckPayloadForPathMtu(last, 0, 1024).code(), EBADMSG);
  EXPECT_EQ(CheckPayloadForPathMtu(last, 1025, 1024).code(), EBADMSG);
  EXPECT_TRUE(CheckPayloadForPathMtu(only, 0, 256).ok());
  EXPECT_EQ(CheckPayloadForPathMtu(only, 257, 256).code(), EBADMSG);
  EXPECT_EQ(CheckPayloadForPathMtu(ack, 4, 4096).code(), EBADMSG);
  EXPECT_TRUE(CheckPayloadForPathMtu(atomic_write, 8, 256).ok());
  EXPECT_EQ(CheckPayloadForPathMtu(atomic_write, 16, 256).code(), EBADMSG);
}

}  // namespace
}  // namespace softrdma::roce
