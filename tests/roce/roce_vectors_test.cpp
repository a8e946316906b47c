// The codec against every vector of roce-wire.md §8: each is built from the
// parameters the document states and must come out byte for byte (IP header
// included), and each parses back into those parameters with a valid ICRC.
// Vector D is a packet a ConnectX-4 Lx put on the wire.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "roce_vectors.h"
#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace softrdma::roce {
namespace {

using vectors::Datagram;

Gid V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  const uint8_t address[4] = {a, b, c, d};
  return Ipv4MappedGid(address);
}

Gid Fd00(uint8_t last) {
  Gid gid{};
  gid[0] = 0xfd;
  gid[15] = last;
  return gid;
}

const uint8_t kHello[] = {'H', 'e', 'l', 'l', 'o'};

// Vector A's parameters: 192.168.1.10 -> 192.168.1.20, IP ID 0x1234, DF,
// TTL 64, TOS 0, UDP 0xC132 -> 4791, checksum 0.
NetworkHeaders VectorANet() {
  NetworkHeaders net;
  net.ip_version = 4;
  net.src_gid = V4(192, 168, 1, 10);
  net.dst_gid = V4(192, 168, 1, 20);
  net.ipv4_identification = 0x1234;
  net.ipv4_flags_fragment = 0x4000;
  net.hop_limit = 64;
  net.traffic_class = 0;
  net.udp_src_port = 0xC132;
  return net;
}

// BTH opcode 0x04, P_Key 0xFFFF, DestQP 0x12, AckReq, PSN 1.
TransportHeaders VectorAHeaders() {
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x04, .pkey = 0xFFFF, .dest_qp = 0x12, .ack_req = true, .psn = 1};
  return h;
}

NetworkHeaders VectorCNet() {
  NetworkHeaders net;
  net.ip_version = 6;
  net.src_gid = Fd00(1);
  net.dst_gid = Fd00(2);
  net.hop_limit = 64;
  net.udp_src_port = 0xC132;
  return net;
}

std::vector<uint8_t> Encode(const NetworkHeaders& net, const TransportHeaders& h,
                            std::span<const uint8_t> payload) {
  std::vector<uint8_t> out(2048);
  size_t written = 0;
  const Status status = EncodeDatagram(net, h, payload, out, &written);
  EXPECT_TRUE(status.ok()) << status.message();
  out.resize(written);
  return out;
}

std::vector<uint8_t> Bytes(std::span<const uint8_t> s) {
  return {s.begin(), s.end()};
}

TEST(RoceVectors, VectorAEncodesByteForByte) {
  EXPECT_EQ(Encode(VectorANet(), VectorAHeaders(), kHello), Bytes(Datagram(vectors::kVectorA)));
}

TEST(RoceVectors, VectorAIcrcIsZlibCrc32OfTheMaskedBuffer) {
  // The document's masked buffer, fed to zlib, gives the documented CRC...
  const auto& masked = vectors::kVectorAMaskedIcrcInput;
  EXPECT_EQ(uint32_t(crc32(0, masked.data(), masked.size())), vectors::kVectorAIcrc);
  // ...and so does our computation from the header fields and transport bytes.
  const auto transport = Datagram(vectors::kVectorA).subspan(28, 12 + 5 + 3);
  EXPECT_EQ(ComputeIcrc(VectorANet(), transport), vectors::kVectorAIcrc);
  EXPECT_EQ(~vectors::kVectorAIcrc, vectors::kVectorARawRegister);
  // The constant seed is zlib's CRC of the 8-byte 0xFF stand-in for the LRH.
  const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(uint32_t(crc32(0, lrh, 8)), kIcrcAfterLrhPrefix);
  EXPECT_EQ(kIcrcAfterLrhPrefix, ~uint32_t{0xDEBB20E3});
  // The wire bytes are the CRC least significant byte first.
  const auto wire = Datagram(vectors::kVectorA).last<4>();
  EXPECT_EQ(LoadIcrc(wire), vectors::kVectorAIcrc);
  EXPECT_EQ(Bytes(wire), (std::vector<uint8_t>{0xd9, 0x50, 0x68, 0xe2}));
}

TEST(RoceVectors, VectorADecodesToItsParameters) {
  DatagramView datagram;
  ASSERT_TRUE(ParseDatagram(Datagram(vectors::kVectorA), &datagram).ok());
  EXPECT_EQ(datagram.net, VectorANet());
  PacketView packet;
  const Status status = ParsePacket(datagram.net, datagram.udp_payload, &packet);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_NE(packet.info, nullptr);
  EXPECT_EQ(packet.info->opcode, 0x04);
  EXPECT_STREQ(packet.info->name, "RC SEND Only");
  TransportHeaders expected = VectorAHeaders();
  expected.bth.pad_count = 3;
  EXPECT_EQ(packet.headers, expected);
  EXPECT_EQ(Bytes(packet.payload), Bytes(kHello));
  EXPECT_EQ(packet.icrc, vectors::kVectorAIcrc);
  // The payload is a view into the datagram, not a copy.
  EXPECT_EQ(packet.payload.data(), Datagram(vectors::kVectorA).data() + 20 + 8 + 12);
}

TEST(RoceVectors, VectorBAcknowledgeEncodesAndDecodes) {
  NetworkHeaders net = VectorANet();
  std::swap(net.src_gid, net.dst_gid);
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x11, .dest_qp = 0x11, .ack_req = false, .psn = 1};
  h.aeth = Aeth{.syndrome = kAckNoCredits, .msn = 1};
  EXPECT_EQ(Encode(net, h, {}), Bytes(Datagram(vectors::kVectorB)));

  DatagramView datagram;
  ASSERT_TRUE(ParseDatagram(Datagram(vectors::kVectorB), &datagram).ok());
  EXPECT_EQ(datagram.net, net);
  PacketView packet;
  ASSERT_TRUE(ParsePacket(datagram.net, datagram.udp_payload, &packet).ok());
  EXPECT_EQ(packet.headers, h);
  EXPECT_EQ(AethTypeOf(packet.headers.aeth.syndrome), AethType::kAck);
  EXPECT_EQ(AethValueOf(packet.headers.aeth.syndrome), 31);
  EXPECT_TRUE(packet.payload.empty());
  EXPECT_EQ(packet.icrc, vectors::kVectorBIcrc);
}

TEST(RoceVectors, VectorCOverIpv6EncodesAndDecodes) {
  EXPECT_EQ(Encode(VectorCNet(), VectorAHeaders(), kHello), Bytes(Datagram(vectors::kVectorC)));
  DatagramView datagram;
  ASSERT_TRUE(ParseDatagram(Datagram(vectors::kVectorC), &datagram).ok());
  EXPECT_EQ(datagram.net, VectorCNet());
  PacketView packet;
  ASSERT_TRUE(ParsePacket(datagram.net, datagram.udp_payload, &packet).ok());
  EXPECT_EQ(packet.icrc, vectors::kVectorCIcrc);
  EXPECT_EQ(Bytes(packet.payload), Bytes(kHello));
  // Same transport packet as vector A, different pseudo-header: different ICRC.
  EXPECT_NE(vectors::kVectorCIcrc, vectors::kVectorAIcrc);
}

// The real NIC's packet: TOS 0xC2 (ECT(0)), IP ID 0x718c (covered by the
// ICRC), UDP source port 0, opcode 0x81 with BECN, DestQP 0x118, PSN 0.
TEST(RoceVectors, VectorDHardwareCnpParsesAndReencodesByteForByte) {
  DatagramView datagram;
  ASSERT_TRUE(ParseDatagram(Datagram(vectors::kVectorD), &datagram).ok());
  EXPECT_EQ(datagram.net.ip_version, 4);
  EXPECT_EQ(datagram.net.traffic_class, 0xC2);
  EXPECT_EQ(datagram.net.ipv4_identification, 0x718c);
  EXPECT_EQ(datagram.net.udp_src_port, 0);
  EXPECT_EQ(datagram.net.udp_checksum, 0);
  EXPECT_EQ(datagram.net.src_gid, V4(10, 0, 17, 1));
  EXPECT_EQ(datagram.net.dst_gid, V4(10, 0, 18, 1));

  PacketView packet;
  const Status status = ParsePacket(datagram.net, datagram.udp_payload, &packet);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(packet.info->operation, Operation::kCongestionNotification);
  EXPECT_TRUE(packet.headers.bth.becn);
  EXPECT_FALSE(packet.headers.bth.fecn);
  EXPECT_EQ(packet.headers.bth.dest_qp, 0x118u);
  EXPECT_EQ(packet.headers.bth.psn, 0u);
  EXPECT_EQ(packet.icrc, LoadIcrc(Datagram(vectors::kVectorD).last<4>()));
  EXPECT_EQ(Bytes(Datagram(vectors::kVectorD).last<4>()),
            (std::vector<uint8_t>{0x82, 0xfd, 0x00, 0x2a}));

  EXPECT_EQ(Encode(datagram.net, packet.headers, {}), Bytes(Datagram(vectors::kVectorD)));
}

TEST(RoceVectors, VectorDIcrcWouldDifferWithTheIpIdMasked) {
  DatagramView datagram;
  ASSERT_TRUE(ParseDatagram(Datagram(vectors::kVectorD), &datagram).ok());
  NetworkHeaders other = datagram.net;
  other.ipv4_identification = 0;
  EXPECT_EQ(VerifyIcrc(other, datagram.udp_payload).code(), EILSEQ);
}

// roce-wire.md §8: changing a masked field leaves the ICRC as it was.
TEST(RoceVectors, MaskedFieldsDoNotChangeTheIcrc) {
  const auto transport = Datagram(vectors::kVectorA).subspan(28, 20);
  for (NetworkHeaders net : {VectorANet(), VectorCNet()}) {
    const uint32_t base = ComputeIcrc(net, transport);
    NetworkHeaders changed = net;
    changed.hop_limit = 1;
    changed.traffic_class = 0xFF;
    changed.flow_label = 0xABCDE;
    changed.udp_checksum = 0x1234;
    EXPECT_EQ(ComputeIcrc(changed, transport), base);

    std::vector<uint8_t> congested(transport.begin(), transport.end());
    congested[4] = 0xC0;  // FECN + BECN
    EXPECT_EQ(ComputeIcrc(net, congested), base);

    // Covered fields do change it.
    changed = net;
    changed.udp_src_port ^= 1;
    EXPECT_NE(ComputeIcrc(changed, transport), base);
    changed = net;
    changed.dst_gid[15] ^= 1;
    EXPECT_NE(ComputeIcrc(changed, transport), base);
    if (net.ip_version == 4) {
      changed = net;
      changed.ipv4_identification ^= 1;
      EXPECT_NE(ComputeIcrc(changed, transport), base);
    }
    std::vector<uint8_t> acked(transport.begin(), transport.end());
    acked[8] ^= 0x01;  // Resv7 is covered
    EXPECT_NE(ComputeIcrc(net, acked), base);
  }
}

// A transport that sends headers, payload and pad from separate buffers gets
// the same ICRC, wherever the pieces are cut (BTH byte 4 included).
TEST(RoceVectors, IcrcOverPiecesEqualsIcrcOverOneBuffer) {
  const auto transport = Datagram(vectors::kVectorA).subspan(28, 20);
  for (size_t cut1 = 0; cut1 <= transport.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= transport.size(); ++cut2) {
      const std::span<const uint8_t> pieces[] = {
          transport.first(cut1), transport.subspan(cut1, cut2 - cut1), transport.subspan(cut2)};
      ASSERT_EQ(ComputeIcrc(VectorANet(), pieces), vectors::kVectorAIcrc) << cut1 << " " << cut2;
    }
  }
}

// A full-MTU WRITE FIRST (BTH, RETH, 4 KiB of payload) over IPv4 and IPv6:
// the ICRC the codec seals equals CRC-32 over the whole masked datagram done
// byte by byte (zlib), and ComputeIcrc gives it for every way the sender
// (headers, payload pieces, pad) or the receiver (one piece) cuts it: small
// pieces are gathered for one CRC call, large ones fed directly, and BTH
// byte 4 is masked in either.
TEST(RoceVectors, IcrcOfAFullMtuPacketWhereverCut) {
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x06, .pkey = 0xFFFF, .dest_qp = 0x12, .ack_req = true, .psn = 7};
  h.reth = Reth{.va = 0x1122334455667788, .rkey = 0xABCD, .dma_length = 65536};
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 131 + 7);
  for (NetworkHeaders net : {VectorANet(), VectorCNet()}) {
    net.traffic_class = 0x12;  // masked fields with values that would show
    net.hop_limit = 17;
    std::vector<uint8_t> datagram(8192);
    size_t written = 0;
    ASSERT_TRUE(EncodeDatagram(net, h, payload, datagram, &written).ok());
    datagram.resize(written);
    const size_t ip = net.ip_version == 4 ? kIpv4HeaderSize : kIpv6HeaderSize;
    const size_t transport_at = ip + kUdpHeaderSize;
    std::vector<uint8_t> masked(8 + datagram.size() - kIcrcSize, 0xFF);  // LRH stand-in first
    std::copy(datagram.begin(), datagram.end() - kIcrcSize, masked.begin() + 8);
    uint8_t* d = masked.data() + 8;
    if (net.ip_version == 4) {
      d[1] = 0xFF;           // TOS
      d[8] = 0xFF;           // TTL
      d[10] = d[11] = 0xFF;  // header checksum
    } else {
      d[0] |= 0x0F;  // traffic class and flow label
      d[1] = d[2] = d[3] = 0xFF;
      d[7] = 0xFF;  // hop limit
    }
    d[ip + 6] = d[ip + 7] = 0xFF;  // UDP checksum
    d[transport_at + 4] = 0xFF;    // BTH byte 4
    const uint32_t reference = uint32_t(crc32(0, masked.data(), uInt(masked.size())));
    const std::span<const uint8_t> all(datagram);
    EXPECT_EQ(LoadIcrc(all.subspan(all.size() - kIcrcSize).first<kIcrcSize>()), reference);
    const auto transport = all.subspan(transport_at, all.size() - transport_at - kIcrcSize);
    EXPECT_EQ(ComputeIcrc(net, transport), reference);
    const size_t cuts[] = {0, 1, 4, 5, 12, 28, 60, 64, 65, 100, 2048, 4000, transport.size()};
    for (size_t cut1 : cuts) {
      for (size_t cut2 : cuts) {
        if (cut2 < cut1) continue;
        const std::span<const uint8_t> pieces[] = {
            transport.first(cut1), transport.subspan(cut1, cut2 - cut1), transport.subspan(cut2)};
        ASSERT_EQ(ComputeIcrc(net, pieces), reference) << cut1 << " " << cut2;
      }
    }
  }
}

}  // namespace
}  // namespace softrdma::roce
