// The ICRC of an IPv4 datagram whose identification is not 0 (UDP GSO
// segments, senders that number their datagrams): the delta a sender XORs
// in, and the receiver's search over the first kIpv4IdSearch IDs.
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

// A WRITE MIDDLE packet of `payload` bytes with the ICRC of `id`.
std::vector<uint8_t> Packet(uint16_t id, size_t payload) {
  TransportHeaders h;
  h.bth = Bth{.opcode = 0x07, .pkey = 0xFFFF, .dest_qp = 0x11, .psn = 42};
  std::vector<uint8_t> data(payload);
  for (size_t i = 0; i < payload; ++i) data[i] = uint8_t(i * 7 + 3);
  std::vector<uint8_t> out(12 + payload + kIcrcSize);
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

TEST(Ipv4IdIcrc, SearchFindsEveryIdBelowTheLimitAndNothingElse) {
  const size_t transport = 12 + 1024;
  for (uint16_t id = 1; id < kIpv4IdSearch; ++id)
    EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(id, transport), transport), id);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(0, transport), -1);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(kIpv4IdSearch, transport), transport), -1);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(0xDEADBEEF, transport), -1);
  // Another length has other deltas (the cache must follow the length).
  EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(5, transport), transport + 4), -1);
  EXPECT_EQ(FindIpv4IdForIcrcDelta(Ipv4IdIcrcDelta(5, transport + 4), transport + 4), 5);
}

TEST(Ipv4IdIcrc, ReceiverAcceptsTheFirstIdsOnly) {
  const NetworkHeaders as_read = Ipv4Net(0);  // a UDP socket does not show the ID
  for (uint16_t id : {0, 1, 7, 63})
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, Packet(id, 4096)).ok()) << id;
  for (uint16_t id : {64, 300, 0xFFFF})
    EXPECT_EQ(VerifyIcrcAnyIpv4Id(as_read, Packet(id, 4096)).code(), EILSEQ) << id;
  std::vector<uint8_t> bad = Packet(3, 4096);
  bad[100] ^= 1;  // a payload bit: no ID makes it right
  EXPECT_EQ(VerifyIcrcAnyIpv4Id(as_read, bad).code(), EILSEQ);
  EXPECT_EQ(VerifyIcrc(as_read, Packet(3, 4096)).code(), EILSEQ);  // the exact check stays exact
}

// The likely ID (the packet's place in its GRO read) is tried first; a wrong
// guess still finds the right ID, and no guess makes a bad ICRC good.
TEST(Ipv4IdIcrc, ReceiverTriesTheLikelyIdFirstAndStillSearches) {
  const NetworkHeaders as_read = Ipv4Net(0);
  for (uint16_t id : {0, 1, 13, 63}) {
    const std::vector<uint8_t> packet = Packet(id, 1024);
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, id).ok()) << id;
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, uint16_t(id == 5 ? 6 : 5)).ok()) << id;
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(as_read, packet, 200).ok())
        << id;  // beyond the search: ignored
  }
  EXPECT_EQ(VerifyIcrcAnyIpv4Id(as_read, Packet(64, 1024), 64).code(), EILSEQ);
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
