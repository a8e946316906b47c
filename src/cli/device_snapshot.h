// What `softrdma run` presents in sysfs about each RDMA device, as plain
// values read once through the public verbs API of the libibverbs.so.1 that
// the launched programs will load. Nothing here is invented: every field is a
// query result, so the files built from it agree with ibv_devinfo.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace softrdma::cli {

struct GidSlot {
  bool valid = false;             // false: an empty slot (reads as the zero GID)
  std::array<uint8_t, 16> raw{};  // network byte order, as ibv_query_gid gives it
  int type = 0;                   // enum ibv_gid_type (valid slots only)
  std::string netdev;             // interface the GID belongs to, "" if unknown
  bool netdev_loopback = false;   // that interface is a loopback one (IFF_LOOPBACK)
};

struct PortSnapshot {
  int port_num = 1;
  int state = 0;       // enum ibv_port_state
  int phys_state = 0;  // IBTA PortPhysicalState (5 = LinkUp)
  int link_layer = 0;  // IBV_LINK_LAYER_*
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t sm_sl = 0;
  uint8_t lmc = 0;
  uint32_t cap_flags = 0;
  uint8_t active_width = 0;     // IBV_WIDTH-style bit (2 = 4X)
  uint8_t active_speed = 0;     // IBV_SPEED-style bit (32 = EDR)
  std::vector<GidSlot> gids;    // gid_tbl_len slots, index = GID index
  std::vector<uint16_t> pkeys;  // host byte order, index = P_Key index
};

struct DeviceSnapshot {
  std::string name;             // ibv_get_device_name: softrdma0
  std::string dev_name;         // ibv_device::dev_name: the uverbs node name
  int node_type = 0;            // enum ibv_node_type
  uint64_t node_guid = 0;       // host byte order
  uint64_t sys_image_guid = 0;  // host byte order
  std::string fw_ver;
  std::vector<PortSnapshot> ports;
};

}  // namespace softrdma::cli
