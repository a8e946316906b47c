// rdma_cm IP private-data header (cm/mad_codec.h, docs/ib-cm.md §5.1).
#include <array>
#include <vector>

#include <gtest/gtest.h>

#include "cm/mad_codec.h"
#include "cm_mad_samples.h"

namespace softrdma::cm {
namespace {

using HeaderBytes = std::array<uint8_t, kCmaHeaderSize>;

HeaderBytes Encode(const CmaHeader& header) {
  HeaderBytes out{};
  EncodeCmaHeader(header, out);
  return out;
}

const CmaHeader kIpv4{.ip_version = 4,
                      .src_port = 0xC3A4,
                      .src_ip = samples::CmaIpv4(192, 168, 1, 10),
                      .dst_ip = samples::CmaIpv4(192, 168, 1, 20)};

const CmaHeader kIpv6{
    .ip_version = 6,
    .src_port = 0x1F90,
    .src_ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a},
    .dst_ip = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55}};

TEST(CmaHeader, Ipv4Layout) {
  // As in the private data of ib-cm.md §9 (MAD bytes 0xa4-0xc7).
  const HeaderBytes want = {
      0x00, 0x40, 0xc3, 0xa4,                                                  // 0-3
      0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0xa8, 0x01, 0x0a,  // 4-19
      0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0xa8, 0x01, 0x14};
  EXPECT_EQ(Encode(kIpv4), want);
  std::optional<CmaHeader> back = DecodeCmaHeader(want);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == kIpv4);
}

TEST(CmaHeader, Ipv4IsNotWrittenIpv4Mapped) {
  // A caller holding ::ffff:a.b.c.d (a GID) still gets the zero pad Linux
  // writes and expects (cma_ip_addr's ip4 member after three zero words).
  CmaHeader mapped = kIpv4;
  mapped.src_ip = samples::Ipv4MappedGid(192, 168, 1, 10);
  mapped.dst_ip = samples::Ipv4MappedGid(192, 168, 1, 20);
  EXPECT_EQ(Encode(mapped), Encode(kIpv4));
}

TEST(CmaHeader, Ipv6Layout) {
  const HeaderBytes b = Encode(kIpv6);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x60);
  EXPECT_EQ(b[2], 0x1F);
  EXPECT_EQ(b[3], 0x90);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 4, b.begin() + 20),
            std::vector<uint8_t>(kIpv6.src_ip.begin(), kIpv6.src_ip.end()));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 20, b.end()),
            std::vector<uint8_t>(kIpv6.dst_ip.begin(), kIpv6.dst_ip.end()));
  std::optional<CmaHeader> back = DecodeCmaHeader(b);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == kIpv6);
}

TEST(CmaHeader, DecodesFromTheWholePrivateData) {
  std::array<uint8_t, kReqPrivateDataSize> private_data = samples::Pattern<kReqPrivateDataSize>(7);
  const HeaderBytes header = Encode(kIpv6);
  std::copy(header.begin(), header.end(), private_data.begin());
  std::optional<CmaHeader> back = DecodeCmaHeader(private_data);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == kIpv6);
}

TEST(CmaHeader, RejectsAVersionOtherThanZero) {
  for (uint8_t version : {0x01, 0x10, 0x11, 0xFF}) {
    HeaderBytes b = Encode(kIpv4);
    b[0] = version;
    EXPECT_FALSE(DecodeCmaHeader(b).has_value()) << int(version);
  }
}

TEST(CmaHeader, RejectsAnIpVersionOtherThan4And6) {
  for (uint8_t ip_version : {0, 1, 5, 7, 15}) {
    HeaderBytes b = Encode(kIpv4);
    b[1] = uint8_t(ip_version << 4);
    EXPECT_FALSE(DecodeCmaHeader(b).has_value()) << int(ip_version);
  }
}

TEST(CmaHeader, RejectsFewerThan36Bytes) {
  const HeaderBytes b = Encode(kIpv4);
  EXPECT_FALSE(DecodeCmaHeader(std::span<const uint8_t>()).has_value());
  EXPECT_FALSE(DecodeCmaHeader(std::span(b).first(kCmaHeaderSize - 1)).has_value());
}

TEST(CmaHeader, IgnoresTheReservedNibbleAndTheIpv4Pad) {
  // Linux reads only the high nibble of byte 1 and the last word of an IPv4
  // address; the decoded address still has its pad zero.
  HeaderBytes b = Encode(kIpv4);
  b[1] |= 0x0F;
  b[4] = 0xEE;
  b[20 + 11] = 0xFF;
  std::optional<CmaHeader> back = DecodeCmaHeader(b);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == kIpv4);
}

}  // namespace
}  // namespace softrdma::cm
