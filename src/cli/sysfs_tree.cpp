#include "cli/sysfs_tree.h"

#include <algorithm>

#include "cli/sysfs_text.h"

namespace softrdma::cli {

namespace {

// The Linux uverbs ABI version (IB_USER_VERBS_ABI_VERSION) that rdma-core 44
// requires of the kernel, shown in infiniband_verbs/abi_version.
constexpr const char kUverbsClassAbi[] = "6\n";
// The per-device driver ABI in infiniband_verbs/<node>/abi_version.
constexpr const char kUverbsDeviceAbi[] = "1\n";

class TreeBuilder {
 public:
  void Dir(const std::string& path) { entries_.push_back({TreeEntry::Kind::kDirectory, path, ""}); }
  void File(const std::string& path, const std::string& text) {
    entries_.push_back({TreeEntry::Kind::kFile, path, text});
  }
  void Link(const std::string& path, const std::string& target) {
    entries_.push_back({TreeEntry::Kind::kSymlink, path, target});
  }
  std::vector<TreeEntry> Take() { return std::move(entries_); }

 private:
  std::vector<TreeEntry> entries_;
};

void AddPort(TreeBuilder& t, const std::string& dir, const PortSnapshot& port) {
  const std::string p = dir + "/ports/" + std::to_string(port.port_num);
  t.Dir(p);
  t.File(p + "/state", PortStateText(port.state));
  t.File(p + "/phys_state", PhysStateText(port.phys_state));
  t.File(p + "/link_layer", LinkLayerText(port.link_layer));
  t.File(p + "/rate", RateText(port.active_width, port.active_speed));
  t.File(p + "/lid", HexText(port.lid));
  t.File(p + "/sm_lid", HexText(port.sm_lid));
  t.File(p + "/sm_sl", DecimalText(port.sm_sl));
  t.File(p + "/lid_mask_count", DecimalText(port.lmc));
  t.File(p + "/cap_mask", Hex32Text(port.cap_flags));

  // Every slot has a gids/<i> file (empty ones read as the zero GID, as in
  // the kernel); gid_attrs exist for filled slots only: the kernel fails a
  // read of an empty slot's type with EINVAL, here the file is absent.
  t.Dir(p + "/gids");
  t.Dir(p + "/gid_attrs");
  t.Dir(p + "/gid_attrs/types");
  t.Dir(p + "/gid_attrs/ndevs");
  for (size_t i = 0; i < port.gids.size(); ++i) {
    const GidSlot& slot = port.gids[i];
    const std::string index = std::to_string(i);
    t.File(p + "/gids/" + index, GidText(slot.valid ? slot.raw : std::array<uint8_t, 16>{}));
    if (!slot.valid) continue;
    t.File(p + "/gid_attrs/types/" + index, GidTypeText(slot.type));
    if (!slot.netdev.empty()) t.File(p + "/gid_attrs/ndevs/" + index, Line(slot.netdev));
  }
  t.Dir(p + "/pkeys");
  for (size_t i = 0; i < port.pkeys.size(); ++i) {
    t.File(p + "/pkeys/" + std::to_string(i), Hex16Text(port.pkeys[i]));
  }
}

void AddDevice(TreeBuilder& t, const DeviceSnapshot& device) {
  const std::string dir = "infiniband/" + device.name;
  t.Dir(dir);
  t.File(dir + "/node_type", NodeTypeText(device.node_type));
  t.File(dir + "/node_guid", GuidText(device.node_guid));
  t.File(dir + "/sys_image_guid", GuidText(device.sys_image_guid));
  t.File(dir + "/fw_ver", Line(device.fw_ver));
  t.Dir(dir + "/ports");
  for (const PortSnapshot& port : device.ports) AddPort(t, dir, port);
  // A kernel device's "device" is its parent bus device, whose net/ lists
  // the network interfaces; each entry leads to the real interface.
  t.Dir(dir + "/device");
  t.Dir(dir + "/device/net");
  for (const std::string& netdev : NetDevicesOf(device)) {
    t.Link(dir + "/device/net/" + netdev, "/sys/class/net/" + netdev);
  }

  const std::string uverbs = "infiniband_verbs/" + device.dev_name;
  t.Dir(uverbs);
  t.File(uverbs + "/ibdev", Line(device.name));
  t.File(uverbs + "/abi_version", kUverbsDeviceAbi);
  t.Link(uverbs + "/device", "../../infiniband/" + device.name + "/device");
}

}  // namespace

std::vector<std::string> NetDevicesOf(const DeviceSnapshot& device) {
  std::vector<std::string> routable;
  std::string loopback;
  for (const PortSnapshot& port : device.ports) {
    for (const GidSlot& slot : port.gids) {
      if (!slot.valid || slot.netdev.empty()) continue;
      if (slot.netdev_loopback) {
        if (loopback.empty()) loopback = slot.netdev;
      } else if (std::find(routable.begin(), routable.end(), slot.netdev) == routable.end()) {
        routable.push_back(slot.netdev);
      }
    }
  }
  if (routable.empty() && !loopback.empty()) routable.push_back(loopback);
  return routable;
}

std::vector<TreeEntry> BuildSysClassTree(const std::vector<DeviceSnapshot>& devices) {
  TreeBuilder t;
  t.Dir("infiniband");
  t.Dir("infiniband_verbs");
  t.File("infiniband_verbs/abi_version", kUverbsClassAbi);
  for (const DeviceSnapshot& device : devices) AddDevice(t, device);
  return t.Take();
}

}  // namespace softrdma::cli
