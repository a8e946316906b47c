// Classic libpcap capture files (the format tcpdump -w and tshark -F pcap
// write): a 24-byte file header, then per packet a 16-byte record header and
// the captured bytes. Both byte orders and both time resolutions (micro- and
// nanosecond magic) are read; pcapng is not (convert with
// `editcap -F pcap in.pcapng out.pcap`). Small enough to own rather than
// depend on libpcap.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace softrdma::tools {

// Link types (www.tcpdump.org/linktypes.html) we can take an IP packet out of.
inline constexpr uint32_t kLinkEthernet = 1;
inline constexpr uint32_t kLinkRaw = 101;       // the packet starts with the IP header
inline constexpr uint32_t kLinkLinuxSll = 113;  // tcpdump -i any (cooked v1)
inline constexpr uint32_t kLinkIpv4 = 228;
inline constexpr uint32_t kLinkIpv6 = 229;
inline constexpr uint32_t kLinkLinuxSll2 = 276;  // tshark -i any (cooked v2)

struct PcapRecord {
  uint32_t original_length = 0;  // on the wire; more than data.size() when cut by the snaplen
  std::vector<uint8_t> data;
};

struct PcapFile {
  uint32_t link_type = 0;
  std::vector<PcapRecord> records;
};

// Reads a whole file. On failure returns nullopt and says why in *error.
std::optional<PcapFile> ReadPcap(const std::string& path, std::string* error);

// Writes a microsecond, little-endian pcap file (all timestamps 0).
bool WritePcap(const std::string& path, uint32_t link_type,
               const std::vector<std::vector<uint8_t>>& packets);

// The IP packet inside one captured frame of the given link type, or an
// empty span when the frame carries no IPv4/IPv6 packet.
std::span<const uint8_t> IpPacketOf(uint32_t link_type, std::span<const uint8_t> frame);

}  // namespace softrdma::tools
