// GrhTemplate and DatagramGrhCache (transport/datagram_grh.h): the GRH area
// a shm UD sender builds per route and completes per datagram.
#include <gtest/gtest.h>

#include <cstring>

#include "core/device.h"
#include "mapped_ipv4_gid.h"
#include "transport/datagram_grh.h"

namespace softrdma::transport {
namespace {

using softrdma::testing::MappedIpv4;

uint16_t Word(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

// The one's complement sum of a header with its checksum in place: 0xffff
// when the checksum is right.
uint32_t FoldedSum(const uint8_t* ip) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += Word(ip + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

TEST(GrhTemplate, Ipv4AreaHasTheLengthsAndAValidChecksumForEveryDatagram) {
  GrhRoute route{};
  route.sgid = MappedIpv4(10, 1, 2, 3);
  route.dgid = MappedIpv4(192, 0, 2, 200);
  route.traffic_class = 0xb8;
  route.hop_limit = 64;
  GrhTemplate t;
  t.Build(route);
  EXPECT_TRUE(t.ipv4());
  EXPECT_EQ(t.sl(), kSlRoceV2Ipv4);
  for (uint32_t len : {0u, 1u, 3u, 4u, 1024u, 4093u, 4096u}) {
    for (bool imm : {false, true}) {
      uint8_t area[kGrhBytes];
      memset(area, 0xa5, sizeof area);
      t.WriteFor(imm, len, area);
      for (int i = 0; i < 20; ++i) ASSERT_EQ(area[i], 0) << "byte " << i;
      const uint8_t* ip = area + 20;
      EXPECT_EQ(ip[0], 0x45);
      EXPECT_EQ(ip[1], 0xb8);
      // IPv4 + UDP + BTH + DETH (+ ImmDt) + payload padded to 4 + ICRC.
      EXPECT_EQ(Word(ip + 2), 20 + 8 + 12 + 8 + (imm ? 4 : 0) + ((len + 3) & ~3u) + 4)
          << "len " << len;
      EXPECT_EQ(ip[8], 64);
      EXPECT_EQ(ip[9], 17);
      EXPECT_EQ(memcmp(ip + 12, route.sgid.raw + 12, 4), 0);
      EXPECT_EQ(memcmp(ip + 16, route.dgid.raw + 12, 4), 0);
      EXPECT_EQ(FoldedSum(ip), 0xffffu) << "len " << len << " imm " << imm;
    }
  }
}

TEST(GrhTemplate, Ipv6AreaIsTheIpv6HeaderWithItsPayloadLength) {
  GrhRoute route{};
  route.sgid.raw[0] = 0xfd;
  route.sgid.raw[15] = 2;
  route.dgid = MappedIpv4(127, 0, 0, 1);  // one side not IPv4: an IPv6 header
  route.traffic_class = 0x12;
  route.flow_label = 0xabcde;
  route.hop_limit = 9;
  GrhTemplate t;
  t.Build(route);
  EXPECT_FALSE(t.ipv4());
  EXPECT_EQ(t.sl(), kSlRoceV2Ipv6);
  uint8_t area[kGrhBytes];
  t.WriteFor(true, 5, area);
  EXPECT_EQ(area[0], 0x61);
  EXPECT_EQ(area[1], 0x2a);
  EXPECT_EQ(Word(area + 2), 0xbcde);
  EXPECT_EQ(Word(area + 4), 8 + 12 + 8 + 4 + 8 + 4);
  EXPECT_EQ(area[6], 17);
  EXPECT_EQ(area[7], 9);
  EXPECT_EQ(memcmp(area + 8, route.sgid.raw, 16), 0);
  EXPECT_EQ(memcmp(area + 24, route.dgid.raw, 16), 0);
}

UdAddress Address(const ibv_gid& dgid, uint8_t sgid_index) {
  UdAddress ud{};
  ud.dgid = dgid;
  ud.sgid_index = sgid_index;
  ud.hop_limit = 64;
  return ud;
}

// The index of 127.0.0.1 in the table (Device::RefreshGids always adds it).
int LoopbackIndex() {
  const ibv_gid lo = MappedIpv4(127, 0, 0, 1);
  for (int i = 0; i < 64; ++i) {
    GidEntry e;
    if (Device::Get().GidAt(i, &e) && memcmp(e.gid.raw, lo.raw, 16) == 0) return i;
  }
  return -1;
}

TEST(DatagramGrhCache, KeepsTheTemplateWhileRouteAndTableAreTheSame) {
  const int lo = LoopbackIndex();
  ASSERT_GE(lo, 0);
  GidLookupCache gids;
  DatagramGrhCache cache;
  const UdAddress a = Address(MappedIpv4(127, 0, 0, 1), static_cast<uint8_t>(lo));
  uint8_t first[kGrhBytes];
  cache.For(a, gids).WriteFor(false, 100, first);
  EXPECT_EQ(cache.rebuilds(), 1u);
  for (int i = 0; i < 5; ++i) {
    uint8_t again[kGrhBytes];
    cache.For(a, gids).WriteFor(false, 100, again);
    EXPECT_EQ(memcmp(first, again, kGrhBytes), 0);
  }
  EXPECT_EQ(cache.rebuilds(), 1u);
  // The source GID came from the table (the IPv4 header's source address).
  EXPECT_EQ(first[20 + 12], 127);
  EXPECT_EQ(first[20 + 15], 1);
}

TEST(DatagramGrhCache, BuildsAgainForAnotherRoute) {
  const int lo = LoopbackIndex();
  ASSERT_GE(lo, 0);
  GidLookupCache gids;
  DatagramGrhCache cache;
  UdAddress a = Address(MappedIpv4(127, 0, 0, 1), static_cast<uint8_t>(lo));
  cache.For(a, gids);
  a.dgid = MappedIpv4(127, 0, 0, 2);
  uint8_t area[kGrhBytes];
  cache.For(a, gids).WriteFor(false, 0, area);
  EXPECT_EQ(cache.rebuilds(), 2u);
  EXPECT_EQ(area[20 + 19], 2) << "the new destination";
  a.hop_limit = 7;
  cache.For(a, gids).WriteFor(false, 0, area);
  EXPECT_EQ(cache.rebuilds(), 3u);
  EXPECT_EQ(area[20 + 8], 7) << "the new hop limit";
  a.traffic_class = 4;
  cache.For(a, gids);
  a.flow_label = 1;
  cache.For(a, gids);
  EXPECT_EQ(cache.rebuilds(), 5u);
}

// Fails if the cache does not look at Device::gid_generation: the source
// GID of an index may change when the table is refreshed.
TEST(DatagramGrhCache, BuildsAgainAfterTheGidTableIsRefreshed) {
  const int lo = LoopbackIndex();
  ASSERT_GE(lo, 0);
  GidLookupCache gids;
  DatagramGrhCache cache;
  const UdAddress a = Address(MappedIpv4(127, 0, 0, 1), static_cast<uint8_t>(lo));
  cache.For(a, gids);
  Device::Get().RefreshGids();
  cache.For(a, gids);
  EXPECT_EQ(cache.rebuilds(), 2u);
}

}  // namespace
}  // namespace softrdma::transport
