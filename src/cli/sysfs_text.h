// The text of each sysfs attribute in the format the Linux RDMA core
// (drivers/infiniband/core/sysfs.c) prints it, so that tools parsing
// /sys/class/infiniband read softrdma's values exactly as a kernel device's.
// Every result ends with the newline the kernel appends.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace softrdma::cli {

// "0200:1234:5678:9abc": four 16-bit groups, most significant first.
std::string GuidText(uint64_t guid_host_order);
// "0000:0000:0000:0000:0000:ffff:7f00:0001": eight 16-bit groups, unabbreviated.
std::string GidText(const std::array<uint8_t, 16>& raw);
// "RoCE v2" or "IB/RoCE v1" (enum ibv_gid_type).
std::string GidTypeText(int gid_type);
// "1: CA", "4: RNIC"... (enum ibv_node_type).
std::string NodeTypeText(int node_type);
// "4: ACTIVE", "1: DOWN"... (enum ibv_port_state).
std::string PortStateText(int state);
// "5: LinkUp", "3: Disabled"... (IBTA PortPhysicalState).
std::string PhysStateText(int phys_state);
// "Ethernet" or "InfiniBand" (IBV_LINK_LAYER_*; unspecified means InfiniBand).
std::string LinkLayerText(int link_layer);
// "100 Gb/sec (4X EDR)" from ibv_port_attr's active_width and active_speed.
std::string RateText(uint8_t active_width, uint8_t active_speed);
// "0x%x", "0x%08x", "0x%04x" and "%u" with the trailing newline.
std::string HexText(uint32_t value);
std::string Hex32Text(uint32_t value);
std::string Hex16Text(uint16_t value);
std::string DecimalText(uint32_t value);
// `text` with the trailing newline.
std::string Line(const std::string& text);

}  // namespace softrdma::cli
