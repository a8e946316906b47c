// The ICRC of an IPv4 datagram whose identification is not 0 (UDP GSO
// segments, senders that number their datagrams): the delta a sender XORs
// in, and the receiver solving the delta for any ID 1..65535.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "wire/roce/packet.h"

namespace softrdma::roce {
namespace {

NetworkHeaders Ipv4Net(uint16_t id) {
  NetworkHeaders net;
  net.ip_version = 4;
  const uint8_t src[4] = {192, 0, 2, 1}, dst[4] = {192, 0, 2, 2};
  net.src_gid = Ipv4MappedGid(src);
  net.dst_gid = Ipv4MappedGid(dst);
  net.ipv4_identification = id;
  net.udp_src_port = 0xC0DE;
  return net;
}

// A SEND ONLY packet of `payload` bytes (0: the shortest packet, a BTH; odd
// sizes: with pad) with the ICRC of `id`.
std::vector<uint8_t> Packet(uint16_t id, size_t payload) {
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x04, .pkey = 0xFFFF, .dest_qp = 0x11, .psn = 42};
  std::vector<uint8_t> data(payload);
  for (size_t i = 0; i < payload; ++i) data[i] = uint8_t(i * 7 + 3);
  std::vector<uint8_t> out(12 + payload + 3 + kIcrcSize);  // 3: the most pad
  size_t written = 0;
  EXPECT_TRUE(EncodePacket(Ipv4Net(id), h, data, out, &written).ok());
  out.resize(written);
  return out;
}

TEST(Ipv4IdIcrc, DeltaIsTheDifferenceOfTheTwoIcrcs) {
  for (size_t payload : {256u, 1024u, 4096u}) {
    const std::vector<uint8_t> zero = Packet(0, payload);
    const size_t transport = zero.size() - kIcrcSize;
    for (uint16_t id : {1, 2, 3, 17, 63, 64, 0x1234, 0xFFFF}) {
      const std::vector<uint8_t> other = Packet(id, payload);
      const uint32_t a = LoadIcrc(std::span<const uint8_t, kIcrcSize>(zero.data() + transport, 4));
      const uint32_t b = LoadIcrc(std::span<const uint8_t, kIcrcSize>(other.data() + transport, 4));
      EXPECT_EQ(a ^ b, Ipv4IdIcrcDelta(id, transport)) << payload << " " << id;
    }
  }
  EXPECT_EQ(Ipv4IdIcrcDelta(0, 100), 0u);
}

// Transport lengths (BTH .. pad) from the shortest packet (a BTH) to a
// 4 KiB payload with a RETH and pad, odd ones included.
constexpr size_t kTransportLengths[] = {
    12, 13, 16, 28, 12 + 255, 12 + 1024, 12 + 16 + 4096, 12 + 16 + 4096 + 3, 9000 - 20 - 8 - 4};

TEST(Ipv4IdIcrc, SolvesEveryIdAtEveryLength) {
  for (size_t transport : kTransportLengths) {
    int wrong = 0;
    for (uint32_t id = 1; id <= 0xFFFF; ++id)
      wrong +=
          FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(uint16_t(id), transport), transport) != int(id);
    EXPECT_EQ(wrong, 0) << transport;
    EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(0xFFFF, transport), transport), 0xFFFF);
  }
  EXPECT_EQ(FindIpv4IdForIcrcDelta(0, 12 + 1024), -1);  // ID 0 is no other ID
  // Another length has other deltas (the cache must follow the length).
  const size_t transport = 12 + 1024;
  EXPECT_NE(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(5, transport), transport + 4), 5);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(5, transport + 4), transport + 4), 5);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(5, transport), transport), 5);
}

// 2^16 of the 2^32 deltas are IDs': a delta that is not one (a corrupted
// packet) is refused. Deterministic: a fixed sequence of 2^20 deltas, of
// which 2^-16 would be expected to pass (16).
TEST(Ipv4IdIcrc, DeltasThatAreNoIdsAreRefused) {
  const size_t transport = 12 + 1024;
  uint32_t x = 0x12345678;
  int accepted = 0;
  for (int i = 0; i < 1 << 20; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;  // xorshift32
    accepted += FindIpv4IdForIcrcDelta(x, transport) > 0;
  }
  EXPECT_GE(accepted, 4);
  EXPECT_LE(accepted, 40);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(0xDEADBEEF, transport), -1);
}

TEST(Ipv4IdIcrc, ReceiverAcceptsEveryId) {
  const NetworkHeaders as_read = Ipv4Net(0);  // a UDP socket does not show the ID
  for (size_t payload : {0u, 1u, 255u, 1024u, 4096u}) {
    for (uint32_t id : {0u, 1u, 7u, 63u, 64u, 300u, 0x1234u, 0x8000u, 0xFFFEu, 0xFFFFu})
      EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, Packet(uint16_t(id), payload)).ok())
          << payload << " " << id;
  }
  int refused = 0;
  for (uint32_t id = 1; id <= 0xFFFF; id += 97)
    refused += !VerifyIcrcAnyIpv4Id(as_read, Packet(uint16_t(id), 256)).ok();
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(VerifyIcrc(as_read, Packet(3, 4096)).code(), EILSEQ);  // the exact check stays exact
}

// Every single-bit error in the transport packet is refused whatever the ID
// the sender used (none of these is an ID's delta), at the smallest size and
// at a 4 KiB payload.
TEST(Ipv4IdIcrc, CorruptedPacketsAreRefusedWhateverTheId) {
  const NetworkHeaders as_read = Ipv4Net(0);
  for (size_t payload : {0u, 4096u}) {
    for (uint16_t id : {0, 5, 0xBEEF}) {
      std::vector<uint8_t> packet = Packet(id, payload);
      int accepted = 0;
      const size_t icrc_at = packet.size() - kIcrcSize;
      const size_t step = payload > 0 ? 7 : 1;  // 4 KiB: every 7th bit (4,700 flips)
      for (size_t bit = 0; bit < icrc_at * 8; bit += step) {
        if (bit / 8 == 4) continue;  // BTH byte 4 is masked: not covered
        packet[bit / 8] ^= uint8_t(1u << (bit % 8));
        accepted += VerifyIcrcAnyIpv4Id(as_read, packet).ok();
        packet[bit / 8] ^= uint8_t(1u << (bit % 8));
      }
      EXPECT_EQ(accepted, 0) << payload << " " << id;
      packet[icrc_at] ^= 1;  // the ICRC itself
      EXPECT_EQ(VerifyIcrcAnyIpv4Id(as_read, packet).code(), EILSEQ);
    }
  }
}

// The likely ID (the packet's place in its GRO read) is tried first; a wrong
// guess still finds the right ID, and no guess makes a bad ICRC good.
TEST(Ipv4IdIcrc, ReceiverTriesTheLikelyIdFirstAndStillSolves) {
  const NetworkHeaders as_read = Ipv4Net(0);
  for (uint16_t id : {0, 1, 13, 63, 64, 0xFFFF}) {
    const std::vector<uint8_t> packet = Packet(id, 1024);
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, id).ok()) << id;
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, uint16_t(id == 5 ? 6 : 5)).ok()) << id;
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, 200).ok()) << id;
  }
  std::vector<uint8_t> bad = Packet(3, 1024);
  bad[100] ^= 1;
  for (uint16_t guess : {0, 3, 4})
    EXPECT_EQ(VerifyIcrcAnyIpv4Id(as_read, bad, guess).code(), EILSEQ);
}

TEST(Ipv4IdIcrc, Ipv6HasNoIdToSearch) {
  NetworkHeaders net6 = Ipv4Net(0);
  net6.ip_version = 6;
  net6.src_gid[10] = net6.src_gid[11] = 0;  // not IPv4-mapped any more
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x04, .pkey = 0xFFFF, .dest_qp = 0x11, .psn = 1};
  std::vector<uint8_t> out(12 + 8 + kIcrcSize);
  size_t written = 0;
  const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(EncodePacket(net6, h, payload, out, &written).ok());
  EXPECT_TRUE(VerifyIcrcAnyIpv4Id(net6, out).ok());
  // The IPv4 delta of ID 1 applied to an IPv6 packet is a corruption.
  uint32_t icrc = LoadIcrc(std::span<const uint8_t, kIcrcSize>(out.data() + written - 4, 4));
  StoreIcrc(icrc ^ Ipv4IdIcrcDelta(1, written - 4),
            std::span<uint8_t, kIcrcSize>(out.data() + written - 4, 4));
  EXPECT_EQ(VerifyIcrcAnyIpv4Id(net6, out).code(), EILSEQ);
}

}  // namespace
}  // namespace softrdma::roce
