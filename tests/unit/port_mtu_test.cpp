// The port's active MTU rule (Device::PortMtuForInterfaceMtus): the largest
// IB MTU one of the RoCE wire's interfaces carries, by rxe's rule per
// interface (IB MTU <= IP MTU - 80).
#include <gtest/gtest.h>

#include "core/device.h"

namespace softrdma {
namespace {

TEST(PortMtu, FollowsTheInterfaceAsOnANic) {
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({1500}), IBV_MTU_1024);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({1400}), IBV_MTU_1024);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({9000}), IBV_MTU_4096);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({4176}), IBV_MTU_4096);  // 4096 + 80
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({4175}), IBV_MTU_2048);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({65536}), IBV_MTU_4096);  // lo
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({576}), IBV_MTU_256);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({300}), IBV_MTU_256);  // nothing fits: the smallest
}

TEST(PortMtu, SeveralInterfacesGiveTheLargestAndUnknownOnesCountForNothing) {
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({1500, 65536}), IBV_MTU_4096);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({1500, 2000}), IBV_MTU_1024);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({0, 1500}), IBV_MTU_1024);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({}), IBV_MTU_4096);
  EXPECT_EQ(Device::PortMtuForInterfaceMtus({0}), IBV_MTU_4096);
}

}  // namespace
}  // namespace softrdma
