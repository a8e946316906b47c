// The /sys/class description built from a device snapshot: paths, values,
// empty GID slots, net devices, the uverbs class.
#include "cli/sysfs_tree.h"

#include <map>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace softrdma::cli {
namespace {

GidSlot Ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d, const char* netdev, bool loopback) {
  GidSlot slot;
  slot.valid = true;
  slot.raw[10] = slot.raw[11] = 0xff;
  slot.raw[12] = a;
  slot.raw[13] = b;
  slot.raw[14] = c;
  slot.raw[15] = d;
  slot.type = IBV_GID_TYPE_ROCE_V2;
  slot.netdev = netdev;
  slot.netdev_loopback = loopback;
  return slot;
}

DeviceSnapshot SampleDevice() {
  DeviceSnapshot d;
  d.name = "softrdma0";
  d.dev_name = "usoftrdma0";
  d.node_type = IBV_NODE_CA;
  d.node_guid = 0x0200'5200'c691'94c6ull;
  d.sys_image_guid = 0x0200'5200'c691'94c7ull;
  d.fw_ver = "softrdma-0.1.0";
  PortSnapshot p;
  p.port_num = 1;
  p.state = IBV_PORT_ACTIVE;
  p.phys_state = 5;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.cap_flags = IBV_PORT_CM_SUP;
  p.active_width = 2;
  p.active_speed = 32;
  p.gids.push_back(Ipv4Gid(192, 0, 2, 2, "eth0", false));
  p.gids.push_back(Ipv4Gid(127, 0, 0, 1, "lo", true));
  p.gids.push_back(Ipv4Gid(198, 51, 100, 7, "eth1", false));
  p.gids.push_back(Ipv4Gid(192, 0, 2, 3, "eth0", false));
  p.gids.resize(6);  // two empty slots
  p.pkeys = {0xffff};
  d.ports.push_back(p);
  return d;
}

std::map<std::string, TreeEntry> ByPath(const std::vector<TreeEntry>& entries) {
  std::map<std::string, TreeEntry> map;
  for (const TreeEntry& e : entries) {
    EXPECT_TRUE(map.emplace(e.path, e).second) << "duplicate " << e.path;
  }
  return map;
}

std::string FileAt(const std::map<std::string, TreeEntry>& tree, const std::string& path) {
  auto it = tree.find(path);
  if (it == tree.end()) return "<absent>";
  EXPECT_EQ(it->second.kind, TreeEntry::Kind::kFile) << path;
  return it->second.content;
}

TEST(SysfsTree, DeviceAttributes) {
  auto tree = ByPath(BuildSysClassTree({SampleDevice()}));
  const std::string dev = "infiniband/softrdma0/";
  EXPECT_EQ(FileAt(tree, dev + "node_type"), "1: CA\n");
  EXPECT_EQ(FileAt(tree, dev + "node_guid"), "0200:5200:c691:94c6\n");
  EXPECT_EQ(FileAt(tree, dev + "sys_image_guid"), "0200:5200:c691:94c7\n");
  EXPECT_EQ(FileAt(tree, dev + "fw_ver"), "softrdma-0.1.0\n");
}

TEST(SysfsTree, PortAttributes) {
  auto tree = ByPath(BuildSysClassTree({SampleDevice()}));
  const std::string port = "infiniband/softrdma0/ports/1/";
  EXPECT_EQ(FileAt(tree, port + "state"), "4: ACTIVE\n");
  EXPECT_EQ(FileAt(tree, port + "phys_state"), "5: LinkUp\n");
  EXPECT_EQ(FileAt(tree, port + "link_layer"), "Ethernet\n");
  EXPECT_EQ(FileAt(tree, port + "rate"), "100 Gb/sec (4X EDR)\n");
  EXPECT_EQ(FileAt(tree, port + "lid"), "0x0\n");
  EXPECT_EQ(FileAt(tree, port + "cap_mask"), "0x00010000\n");
  EXPECT_EQ(FileAt(tree, port + "pkeys/0"), "0xffff\n");
  EXPECT_EQ(FileAt(tree, port + "pkeys/1"), "<absent>");
}

TEST(SysfsTree, EveryGidSlotHasAFileAndOnlyFilledOnesHaveAttributes) {
  auto tree = ByPath(BuildSysClassTree({SampleDevice()}));
  const std::string port = "infiniband/softrdma0/ports/1/";
  EXPECT_EQ(FileAt(tree, port + "gids/0"), "0000:0000:0000:0000:0000:ffff:c000:0202\n");
  EXPECT_EQ(FileAt(tree, port + "gids/1"), "0000:0000:0000:0000:0000:ffff:7f00:0001\n");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/types/1"), "RoCE v2\n");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/ndevs/0"), "eth0\n");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/ndevs/1"), "lo\n");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/ndevs/2"), "eth1\n");
  EXPECT_EQ(FileAt(tree, port + "gids/5"), "0000:0000:0000:0000:0000:0000:0000:0000\n");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/types/4"), "<absent>");
  EXPECT_EQ(FileAt(tree, port + "gid_attrs/ndevs/5"), "<absent>");
  EXPECT_EQ(FileAt(tree, port + "gids/6"), "<absent>");
}

TEST(SysfsTree, NetDevicesAreTheNonLoopbackInterfacesOnceInGidOrder) {
  const DeviceSnapshot d = SampleDevice();
  EXPECT_EQ(NetDevicesOf(d), (std::vector<std::string>{"eth0", "eth1"}));
  auto tree = ByPath(BuildSysClassTree({d}));
  const auto& link = tree.at("infiniband/softrdma0/device/net/eth1");
  EXPECT_EQ(link.kind, TreeEntry::Kind::kSymlink);
  EXPECT_EQ(link.content, "/sys/class/net/eth1");
  EXPECT_EQ(tree.count("infiniband/softrdma0/device/net/lo"), 0u);
}

TEST(SysfsTree, LoopbackIsTheNetDeviceOnlyWhenAlone) {
  DeviceSnapshot d = SampleDevice();
  d.ports[0].gids = {Ipv4Gid(127, 0, 0, 1, "lo", true), GidSlot{}};
  EXPECT_EQ(NetDevicesOf(d), (std::vector<std::string>{"lo"}));
  d.ports[0].gids = {GidSlot{}};
  EXPECT_TRUE(NetDevicesOf(d).empty());
}

TEST(SysfsTree, UverbsClassNamesTheDevice) {
  auto tree = ByPath(BuildSysClassTree({SampleDevice()}));
  EXPECT_EQ(FileAt(tree, "infiniband_verbs/abi_version"), "6\n");
  EXPECT_EQ(FileAt(tree, "infiniband_verbs/usoftrdma0/ibdev"), "softrdma0\n");
  EXPECT_EQ(FileAt(tree, "infiniband_verbs/usoftrdma0/abi_version"), "1\n");
  EXPECT_EQ(tree.at("infiniband_verbs/usoftrdma0/device").content,
            "../../infiniband/softrdma0/device");
}

TEST(SysfsTree, DirectoriesComeBeforeWhatTheyHold) {
  const auto entries = BuildSysClassTree({SampleDevice()});
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < entries.size(); ++i) position[entries[i].path] = i;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& path = entries[i].path;
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) continue;
    const std::string parent = path.substr(0, slash);
    ASSERT_TRUE(position.count(parent)) << parent << " missing for " << path;
    EXPECT_LT(position[parent], i) << path;
    EXPECT_EQ(entries[position[parent]].kind, TreeEntry::Kind::kDirectory) << parent;
  }
}

TEST(SysfsTree, NoDeviceGivesOnlyTheClassDirectories) {
  auto tree = ByPath(BuildSysClassTree({}));
  EXPECT_EQ(tree.size(), 3u);
  EXPECT_TRUE(tree.count("infiniband"));
  EXPECT_TRUE(tree.count("infiniband_verbs"));
}

}  // namespace
}  // namespace softrdma::cli
