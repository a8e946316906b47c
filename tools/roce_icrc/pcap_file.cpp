// Classic pcap reading and writing, and the link-layer headers in front of
// IP (see pcap_file.h).
#include "pcap_file.h"

#include <fstream>
#include <iterator>

namespace softrdma::tools {
namespace {

constexpr uint32_t kMagicMicroseconds = 0xA1B2C3D4;
constexpr uint32_t kMagicNanoseconds = 0xA1B23C4D;
constexpr size_t kFileHeaderSize = 24;
constexpr size_t kRecordHeaderSize = 16;
// A record longer than this is a corrupt file, not a packet (pcap's own limit).
constexpr uint32_t kMaxRecordLength = 256 * 1024;

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr uint16_t kEtherTypeVlan = 0x8100;
constexpr uint16_t kEtherTypeQinQ = 0x88A8;

uint32_t Load32(const uint8_t* p, bool swapped) {
  const uint32_t little =
      uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  return swapped ? __builtin_bswap32(little) : little;
}

void Store32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

uint16_t Be16(std::span<const uint8_t> bytes, size_t at) {
  return uint16_t(bytes[at] << 8 | bytes[at + 1]);
}

bool IsIpEtherType(uint16_t type) {
  return type == kEtherTypeIpv4 || type == kEtherTypeIpv6;
}

std::span<const uint8_t> AfterEthernet(std::span<const uint8_t> frame) {
  size_t at = 12;  // destination and source MAC
  while (frame.size() >= at + 2) {
    const uint16_t type = Be16(frame, at);
    if (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
      at += 4;  // the tag's type and TCI, then the inner type
      continue;
    }
    return IsIpEtherType(type) ? frame.subspan(at + 2) : std::span<const uint8_t>{};
  }
  return {};
}

}  // namespace

std::optional<PcapFile> ReadPcap(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return std::nullopt;
  }
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
  if (bytes.size() < kFileHeaderSize) {
    *error = path + ": shorter than a pcap file header";
    return std::nullopt;
  }
  const uint32_t magic = Load32(bytes.data(), false);
  bool swapped = false;
  if (magic == kMagicMicroseconds || magic == kMagicNanoseconds) {
    swapped = false;
  } else if (__builtin_bswap32(magic) == kMagicMicroseconds ||
             __builtin_bswap32(magic) == kMagicNanoseconds) {
    swapped = true;
  } else {
    *error = path + ": not a classic pcap file (pcapng? convert with editcap -F pcap)";
    return std::nullopt;
  }
  PcapFile file;
  // The low 28 bits are the link type; the top bits may carry an FCS length.
  file.link_type = Load32(bytes.data() + 20, swapped) & 0x0FFFFFFF;
  size_t at = kFileHeaderSize;
  while (at < bytes.size()) {
    if (bytes.size() - at < kRecordHeaderSize) {
      *error = path + ": truncated record header at offset " + std::to_string(at);
      return std::nullopt;
    }
    const uint32_t captured = Load32(bytes.data() + at + 8, swapped);
    const uint32_t original = Load32(bytes.data() + at + 12, swapped);
    at += kRecordHeaderSize;
    if (captured > kMaxRecordLength || bytes.size() - at < captured) {
      *error = path + ": truncated or corrupt record at offset " + std::to_string(at);
      return std::nullopt;
    }
    file.records.push_back(PcapRecord{
        .original_length = original,
        .data =
            std::vector<uint8_t>(bytes.begin() + long(at), bytes.begin() + long(at + captured))});
    at += captured;
  }
  return file;
}

bool WritePcap(const std::string& path, uint32_t link_type,
               const std::vector<std::vector<uint8_t>>& packets) {
  std::vector<uint8_t> out;
  Store32(out, kMagicMicroseconds);
  out.push_back(2);  // version 2.4
  out.push_back(0);
  out.push_back(4);
  out.push_back(0);
  Store32(out, 0);  // time zone
  Store32(out, 0);  // timestamp accuracy
  Store32(out, 65535);
  Store32(out, link_type);
  for (const auto& packet : packets) {
    Store32(out, 0);  // seconds
    Store32(out, 0);  // microseconds
    Store32(out, uint32_t(packet.size()));
    Store32(out, uint32_t(packet.size()));
    out.insert(out.end(), packet.begin(), packet.end());
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
  return bool(file);
}

std::span<const uint8_t> IpPacketOf(uint32_t link_type, std::span<const uint8_t> frame) {
  switch (link_type) {
    case kLinkEthernet:
      return AfterEthernet(frame);
    case kLinkRaw:
    case kLinkIpv4:
    case kLinkIpv6:
      return frame;
    case kLinkLinuxSll:  // 16 bytes; protocol (an EtherType) at 14
      if (frame.size() < 16 || !IsIpEtherType(Be16(frame, 14))) return {};
      return frame.subspan(16);
    case kLinkLinuxSll2:  // 20 bytes; protocol at 0
      if (frame.size() < 20 || !IsIpEtherType(Be16(frame, 0))) return {};
      return frame.subspan(20);
    default:
      return {};
  }
}

}  // namespace softrdma::tools
