// Malformed packets and datagrams: each is refused with the errno packet.h /
// ip_datagram.h document for its reason, never accepted and never read past
// its end (the test binary runs under ASan in sanitizer builds; the fuzz
// target covers the rest).
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "roce_vectors.h"
#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace softrdma::roce {
namespace {

using vectors::Datagram;

std::vector<uint8_t> VectorAUdpPayload() {
  const auto d = Datagram(vectors::kVectorA);
  return {d.begin() + 28, d.end()};
}

NetworkHeaders VectorANet() {
  DatagramView view;
  EXPECT_TRUE(ParseDatagram(Datagram(vectors::kVectorA), &view).ok());
  return view.net;
}

int ParseCode(const std::vector<uint8_t>& bytes) {
  PacketView view;
  return ParsePacket(VectorANet(), bytes, &view).code();
}

std::vector<uint8_t> WithFreshIcrc(std::vector<uint8_t> bytes) {
  const uint32_t icrc =
      ComputeIcrc(VectorANet(), std::span<const uint8_t>(bytes).first(bytes.size() - 4));
  StoreIcrc(icrc, std::span(bytes).last<4>());
  return bytes;
}

TEST(RoceMalformed, TooShortForABthAndIcrc) {
  const auto good = VectorAUdpPayload();
  for (size_t n = 0; n < kBthSize + kIcrcSize; ++n) {
    PacketView view;
    EXPECT_EQ(ParseTransport(std::span(good).first(n), &view).code(), EMSGSIZE) << n;
    EXPECT_EQ(VerifyIcrc(VectorANet(), std::span(good).first(n)).code(), EMSGSIZE) << n;
  }
}

TEST(RoceMalformed, TooShortForTheOpcodesHeaders) {
  // An RDMA WRITE Only (BTH + RETH = 28 bytes) cut to BTH + 8 + ICRC.
  std::vector<uint8_t> bytes(kBthSize + 8 + kIcrcSize, 0);
  bytes[0] = 0x0A;
  PacketView view;
  EXPECT_EQ(ParseTransport(bytes, &view).code(), EMSGSIZE);
  // Vector A's SEND says pad 3: cutting its payload to 2 bytes leaves no
  // room for the pad it claims.
  auto send = VectorAUdpPayload();
  send.erase(send.begin() + 12, send.begin() + 12 + 5 + 1);  // 2 bytes left
  EXPECT_EQ(ParseTransport(send, &view).code(), EMSGSIZE);
}

TEST(RoceMalformed, UnknownOpcodes) {
  for (int op : {0x15, 0x18, 0x1E, 0x2C, 0x3F, 0x55, 0x63, 0x66, 0x80, 0xA0, 0xB7, 0xFF}) {
    auto bytes = VectorAUdpPayload();
    bytes[0] = uint8_t(op);
    EXPECT_EQ(ParseCode(WithFreshIcrc(bytes)), EOPNOTSUPP) << std::hex << op;
  }
}

TEST(RoceMalformed, NonZeroTransportVersion) {
  auto bytes = VectorAUdpPayload();
  bytes[1] |= 0x01;
  EXPECT_EQ(ParseCode(WithFreshIcrc(bytes)), EPROTONOSUPPORT);
}

TEST(RoceMalformed, PadCountThatDisagreesWithTheLength) {
  // The receiver takes the payload length from the UDP length minus PadCnt
  // (roce-wire.md §5), so another pad count just moves the payload's end...
  for (uint8_t pad : {0, 1, 2}) {  // vector A sends 3
    auto bytes = VectorAUdpPayload();
    bytes[1] = uint8_t((bytes[1] & ~0x30) | (pad << 4));
    PacketView view;
    ASSERT_TRUE(ParsePacket(VectorANet(), WithFreshIcrc(bytes), &view).ok());
    EXPECT_EQ(view.payload.size(), 8u - pad);
  }
  // ...but payload + pad must fill whole 4-byte words,
  auto odd = VectorAUdpPayload();
  odd.insert(odd.begin() + 12, 0x00);
  EXPECT_EQ(ParseCode(WithFreshIcrc(odd)), EBADMSG);
  // an opcode without payload must have no pad either,
  std::vector<uint8_t> ack(kBthSize + kAethSize + 4 + kIcrcSize, 0);
  ack[0] = 0x11;
  ack[1] = 0x30;  // pad 3 over 4 bytes: 1 byte of payload
  EXPECT_EQ(ParseCode(WithFreshIcrc(ack)), EBADMSG);
  // and the pad cannot be longer than what follows the headers.
  std::vector<uint8_t> bare_ack(kBthSize + kAethSize + kIcrcSize, 0);
  bare_ack[0] = 0x11;
  bare_ack[1] = 0x10;
  EXPECT_EQ(ParseCode(WithFreshIcrc(bare_ack)), EMSGSIZE);
}

TEST(RoceMalformed, PayloadTheOpcodeDoesNotAllow) {
  auto bytes = VectorAUdpPayload();  // 12 BTH + 8 payload/pad + 4 ICRC
  bytes[1] &= ~0x30;                 // pad 0: 8 payload bytes
  // ACK (needs AETH, no payload): 4 bytes of AETH leave 4 payload bytes.
  bytes[0] = 0x11;
  EXPECT_EQ(ParseCode(WithFreshIcrc(bytes)), EBADMSG);
  // SEND First with 8 bytes: FIRST carries a whole path MTU (>= 256).
  bytes[0] = 0x00;
  EXPECT_EQ(ParseCode(WithFreshIcrc(bytes)), EBADMSG);
  // SEND Last with no payload at all.
  std::vector<uint8_t> empty_last(kBthSize + kIcrcSize, 0);
  empty_last[0] = 0x02;
  EXPECT_EQ(ParseCode(WithFreshIcrc(empty_last)), EBADMSG);
  // ATOMIC WRITE with 4 bytes instead of 8.
  std::vector<uint8_t> atomic_write(kBthSize + kRethSize + 4 + kIcrcSize, 0);
  atomic_write[0] = 0x1D;
  EXPECT_EQ(ParseCode(WithFreshIcrc(atomic_write)), EBADMSG);
  // More than 4096 payload bytes.
  std::vector<uint8_t> huge(kBthSize + 4100 + kIcrcSize, 0);
  huge[0] = 0x04;
  EXPECT_EQ(ParseCode(WithFreshIcrc(huge)), EBADMSG);
}

TEST(RoceMalformed, BadIcrc) {
  auto bytes = VectorAUdpPayload();
  bytes.back() ^= 0x80;
  EXPECT_EQ(ParseCode(bytes), EILSEQ);
  // ParseTransport does not look at the ICRC.
  PacketView view;
  EXPECT_TRUE(ParseTransport(bytes, &view).ok());
  // The right bytes against the wrong addresses.
  NetworkHeaders other = VectorANet();
  other.src_gid[15] ^= 1;
  EXPECT_EQ(ParsePacket(other, VectorAUdpPayload(), &view).code(), EILSEQ);
}

TEST(RoceMalformed, EncoderRefusesWhatTheParserWould) {
  std::vector<uint8_t> out(64);
  size_t written = 0;
  TransportHeaders h;
  h.bth.opcode = 0x15;
  EXPECT_EQ(EncodeTransportHeaders(h, 0, out, &written).code(), EINVAL);
  h.bth.opcode = 0x11;  // ACK: no payload
  EXPECT_EQ(EncodeTransportHeaders(h, 4, out, &written).code(), EINVAL);
  EXPECT_EQ(EncodeTransportHeaders(h, 0, std::span(out).first(15), &written).code(), ENOBUFS);
  const uint8_t payload[8] = {};
  h.bth.opcode = 0x04;
  EXPECT_EQ(EncodePacket({}, h, payload, std::span(out).first(23), &written).code(), ENOBUFS);
  EXPECT_TRUE(EncodePacket({}, h, payload, std::span(out).first(24), &written).ok());
  EXPECT_EQ(written, 24u);
  NetworkHeaders net;
  net.ip_version = 5;
  EXPECT_EQ(EncodeDatagram(net, h, payload, out, &written).code(), EINVAL);
  net.ip_version = 4;
  net.src_gid[0] = 0xfe;  // not IPv4-mapped
  EXPECT_EQ(EncodeDatagram(net, h, payload, out, &written).code(), EINVAL);
}

std::vector<uint8_t> VectorAIp() {
  const auto d = Datagram(vectors::kVectorA);
  return {d.begin(), d.end()};
}

void FixIpv4Checksum(std::vector<uint8_t>& ip) {
  ip[10] = ip[11] = 0;
  const uint16_t sum = Ipv4HeaderChecksum(std::span(ip).first<kIpv4HeaderSize>());
  ip[10] = uint8_t(sum >> 8);
  ip[11] = uint8_t(sum);
}

int DatagramCode(const std::vector<uint8_t>& ip) {
  DatagramView view;
  return ParseDatagram(ip, &view).code();
}

TEST(RoceMalformed, Datagrams) {
  EXPECT_EQ(DatagramCode({}), EMSGSIZE);
  auto ip = VectorAIp();
  EXPECT_EQ(DatagramCode(ip), 0);
  // Ethernet padding after the IP packet is ignored (the IP length decides).
  auto padded = ip;
  padded.insert(padded.end(), 6, 0);
  DatagramView view;
  ASSERT_TRUE(ParseDatagram(padded, &view).ok());
  EXPECT_EQ(view.udp_payload.size(), ip.size() - 28);

  EXPECT_EQ(DatagramCode({ip.begin(), ip.begin() + 19}), EMSGSIZE);
  EXPECT_EQ(DatagramCode({ip.begin(), ip.end() - 1}), EMSGSIZE);  // total length says more

  auto options = ip;
  options[0] = 0x46;
  FixIpv4Checksum(options);
  EXPECT_EQ(DatagramCode(options), EPROTONOSUPPORT);

  auto checksum = ip;
  checksum[10] ^= 1;
  EXPECT_EQ(DatagramCode(checksum), EBADMSG);

  auto fragment = ip;
  fragment[6] = 0x20;  // MF
  FixIpv4Checksum(fragment);
  EXPECT_EQ(DatagramCode(fragment), EPROTONOSUPPORT);

  auto tcp = ip;
  tcp[9] = 6;
  FixIpv4Checksum(tcp);
  EXPECT_EQ(DatagramCode(tcp), EPROTONOSUPPORT);

  auto port = ip;
  port[23] = 0xB8;  // 4792
  EXPECT_EQ(DatagramCode(port), EPROTONOSUPPORT);

  auto udp_length = ip;
  udp_length[25] -= 4;
  EXPECT_EQ(DatagramCode(udp_length), EBADMSG);

  auto version = ip;
  version[0] = 0x55;
  EXPECT_EQ(DatagramCode(version), EPROTONOSUPPORT);

  const auto v6 = Datagram(vectors::kVectorC);
  std::vector<uint8_t> ip6(v6.begin(), v6.end());
  EXPECT_EQ(DatagramCode(ip6), 0);
  EXPECT_EQ(DatagramCode({ip6.begin(), ip6.begin() + 39}), EMSGSIZE);
  EXPECT_EQ(DatagramCode({ip6.begin(), ip6.end() - 1}), EMSGSIZE);
  auto ext = ip6;
  ext[6] = 0;  // hop-by-hop options header
  EXPECT_EQ(DatagramCode(ext), EPROTONOSUPPORT);
  auto tiny = ip6;
  tiny[4] = 0;
  tiny[5] = 4;  // payload shorter than a UDP header
  EXPECT_EQ(DatagramCode(tiny), EMSGSIZE);
}

}  // namespace
}  // namespace softrdma::roce
