// The sysfs attribute texts against the formats of the Linux RDMA core.
#include "cli/sysfs_text.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace softrdma::cli {
namespace {

TEST(SysfsText, GuidIsFourGroupsMostSignificantFirst) {
  EXPECT_EQ(GuidText(0x0200'5200'c691'94c6ull), "0200:5200:c691:94c6\n");
  EXPECT_EQ(GuidText(0), "0000:0000:0000:0000\n");
}

TEST(SysfsText, GidIsEightUnabbreviatedGroups) {
  std::array<uint8_t, 16> raw{};
  raw[10] = 0xff;
  raw[11] = 0xff;
  raw[12] = 127;
  raw[15] = 1;
  EXPECT_EQ(GidText(raw), "0000:0000:0000:0000:0000:ffff:7f00:0001\n");
  std::array<uint8_t, 16> v6{0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                             0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  EXPECT_EQ(GidText(v6), "fe80:0000:0000:0000:0211:22ff:fe33:4455\n");
}

TEST(SysfsText, GidTypeNames) {
  EXPECT_EQ(GidTypeText(IBV_GID_TYPE_ROCE_V2), "RoCE v2\n");
  EXPECT_EQ(GidTypeText(IBV_GID_TYPE_ROCE_V1), "IB/RoCE v1\n");
  EXPECT_EQ(GidTypeText(IBV_GID_TYPE_IB), "IB/RoCE v1\n");
}

TEST(SysfsText, StatesCarryNumberAndName) {
  EXPECT_EQ(NodeTypeText(IBV_NODE_CA), "1: CA\n");
  EXPECT_EQ(NodeTypeText(IBV_NODE_RNIC), "4: RNIC\n");
  EXPECT_EQ(PortStateText(IBV_PORT_ACTIVE), "4: ACTIVE\n");
  EXPECT_EQ(PortStateText(IBV_PORT_DOWN), "1: DOWN\n");
  EXPECT_EQ(PortStateText(42), "42: UNKNOWN\n");
  EXPECT_EQ(PhysStateText(5), "5: LinkUp\n");
  EXPECT_EQ(PhysStateText(3), "3: Disabled\n");
  EXPECT_EQ(PhysStateText(99), "99: <unknown>\n");
}

TEST(SysfsText, LinkLayer) {
  EXPECT_EQ(LinkLayerText(IBV_LINK_LAYER_ETHERNET), "Ethernet\n");
  EXPECT_EQ(LinkLayerText(IBV_LINK_LAYER_INFINIBAND), "InfiniBand\n");
  EXPECT_EQ(LinkLayerText(IBV_LINK_LAYER_UNSPECIFIED), "InfiniBand\n");
}

TEST(SysfsText, RateFromWidthAndSpeed) {
  EXPECT_EQ(RateText(2, 32), "100 Gb/sec (4X EDR)\n");
  EXPECT_EQ(RateText(1, 1), "2.5 Gb/sec (1X)\n");
  EXPECT_EQ(RateText(2, 1), "10 Gb/sec (4X)\n");
  EXPECT_EQ(RateText(8, 4), "120 Gb/sec (12X QDR)\n");
  EXPECT_EQ(RateText(2, 16), "56 Gb/sec (4X FDR)\n");
}

TEST(SysfsText, Numbers) {
  EXPECT_EQ(HexText(0), "0x0\n");
  EXPECT_EQ(HexText(0x1a), "0x1a\n");
  EXPECT_EQ(Hex32Text(IBV_PORT_CM_SUP), "0x00010000\n");
  EXPECT_EQ(Hex16Text(0xffff), "0xffff\n");
  EXPECT_EQ(Hex16Text(0x7f), "0x007f\n");
  EXPECT_EQ(DecimalText(15), "15\n");
}

}  // namespace
}  // namespace softrdma::cli
