#include "cli/sysfs_text.h"

#include <cstdio>

#include <infiniband/verbs.h>

namespace softrdma::cli {

namespace {

std::string Printf(const char* format, auto... args) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

// Lane count of an active_width bit, 0 if unknown.
int Lanes(uint8_t width) {
  switch (width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

struct SpeedInfo {
  int tenths_gbps;   // per lane, in 0.1 Gb/s
  const char* name;  // suffix the kernel prints after the width
};

SpeedInfo Speed(uint8_t speed) {
  switch (speed) {
    case 1:
      return {25, ""};
    case 2:
      return {50, " DDR"};
    case 4:
      return {100, " QDR"};
    case 8:
      return {100, " FDR10"};
    case 16:
      return {140, " FDR"};
    case 32:
      return {250, " EDR"};
    case 64:
      return {500, " HDR"};
    case 128:
      return {1000, " NDR"};
    default:
      return {0, ""};
  }
}

}  // namespace

std::string Line(const std::string& text) {
  return text + "\n";
}

std::string GuidText(uint64_t g) {
  return Printf("%04x:%04x:%04x:%04x\n", static_cast<unsigned>(g >> 48) & 0xffff,
                static_cast<unsigned>(g >> 32) & 0xffff, static_cast<unsigned>(g >> 16) & 0xffff,
                static_cast<unsigned>(g) & 0xffff);
}

std::string GidText(const std::array<uint8_t, 16>& raw) {
  std::string text;
  for (size_t i = 0; i < raw.size(); i += 2) {
    if (i != 0) text += ':';
    text += Printf("%02x%02x", raw[i], raw[i + 1]);
  }
  return text + "\n";
}

std::string GidTypeText(int gid_type) {
  return gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2\n" : "IB/RoCE v1\n";
}

std::string NodeTypeText(int node_type) {
  switch (node_type) {
    case IBV_NODE_CA:
      return "1: CA\n";
    case IBV_NODE_SWITCH:
      return "2: switch\n";
    case IBV_NODE_ROUTER:
      return "3: router\n";
    case IBV_NODE_RNIC:
      return "4: RNIC\n";
    case IBV_NODE_USNIC:
      return "5: usNIC\n";
    case IBV_NODE_USNIC_UDP:
      return "6: usNIC UDP\n";
    default:
      return Printf("%d: <unknown>\n", node_type);
  }
}

std::string PortStateText(int state) {
  static const char* const kNames[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  const bool known = state >= 0 && state < static_cast<int>(std::size(kNames));
  return Printf("%d: %s\n", state, known ? kNames[state] : "UNKNOWN");
}

std::string PhysStateText(int phys_state) {
  static const char* const kNames[] = {
      "<unknown>",         "Sleep",   "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
      "LinkErrorRecovery", "Phy Test"};
  const bool known = phys_state >= 0 && phys_state < static_cast<int>(std::size(kNames));
  return Printf("%d: %s\n", phys_state, known ? kNames[phys_state] : "<unknown>");
}

std::string LinkLayerText(int link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet\n" : "InfiniBand\n";
}

std::string RateText(uint8_t active_width, uint8_t active_speed) {
  const int lanes = Lanes(active_width);
  const SpeedInfo speed = Speed(active_speed);
  const int tenths = lanes * speed.tenths_gbps;
  return Printf("%d%s Gb/sec (%dX%s)\n", tenths / 10, tenths % 10 ? ".5" : "", lanes, speed.name);
}

std::string HexText(uint32_t value) {
  return Printf("0x%x\n", value);
}
std::string Hex32Text(uint32_t value) {
  return Printf("0x%08x\n", value);
}
std::string Hex16Text(uint16_t value) {
  return Printf("0x%04x\n", value);
}
std::string DecimalText(uint32_t value) {
  return Printf("%u\n", value);
}

}  // namespace softrdma::cli
