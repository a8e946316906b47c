// Writes the pcap files roce_icrc_test.sh feeds to softrdma_roce_icrc and to
// tshark, into the directory given as argv[1]:
//   vectors.pcap       roce-wire.md §8's four frames (Ethernet), plus a UDP
//                      datagram and an ARP frame that must be skipped
//   vectors_sll2.pcap  the same four datagrams behind Linux cooked v2 headers
//                      (what tshark -i any writes)
//   opcodes.pcap       one IPv4 frame per opcode of the codec's table, then
//                      IPv6 frames of three; opcodes.txt lists their opcodes and
//                      PSNs in order, as tshark should decode them
//   corrupt.pcap       the four vectors, vector A with one payload bit flipped
//   truncated.pcap     vector A cut by a 40-byte snap length
//   no_roce.pcap       only that UDP datagram
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "../roce/roce_samples.h"
#include "../roce/roce_vectors.h"
#include "pcap_file.h"
#include "wire/roce/ip_datagram.h"

namespace {

using namespace softrdma::roce;
using softrdma::tools::WritePcap;
using Frame = std::vector<uint8_t>;

template <size_t N>
Frame Bytes(const std::array<uint8_t, N>& a) {
  return {a.begin(), a.end()};
}

Frame Ethernet(std::span<const uint8_t> ip, uint8_t ip_version) {
  Frame frame = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
  frame.push_back(ip_version == 4 ? 0x08 : 0x86);
  frame.push_back(ip_version == 4 ? 0x00 : 0xDD);
  frame.insert(frame.end(), ip.begin(), ip.end());
  return frame;
}

// Linux cooked capture v2: protocol, reserved, interface index, ARPHRD_ETHER,
// packet type, address length, 8 address bytes.
Frame CookedV2(std::span<const uint8_t> ip, uint8_t ip_version) {
  Frame frame = {uint8_t(ip_version == 4 ? 0x08 : 0x86),
                 uint8_t(ip_version == 4 ? 0x00 : 0xDD),
                 0,
                 0,
                 0,
                 0,
                 0,
                 2,
                 0,
                 1,
                 0,
                 6,
                 2,
                 0,
                 0,
                 0,
                 0,
                 1,
                 0,
                 0};
  frame.insert(frame.end(), ip.begin(), ip.end());
  return frame;
}

// A UDP datagram to port 9999 (IPv4 header checksum valid): not RoCE.
Frame OtherUdpFrame() {
  Frame ip = {0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2};
  const uint8_t udp[] = {0x30, 0x39, 0x27, 0x0F, 0, 12, 0, 0, 0xAB, 0xCD, 0x01, 0x00};
  ip.insert(ip.end(), std::begin(udp), std::end(udp));
  const uint16_t sum = Ipv4HeaderChecksum(std::span<const uint8_t>(ip).first<kIpv4HeaderSize>());
  ip[10] = uint8_t(sum >> 8);
  ip[11] = uint8_t(sum);
  return Ethernet(ip, 4);
}

Frame ArpFrame() {
  Frame frame = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x06};
  frame.resize(14 + 28, 0);
  return frame;
}

bool Fail(const char* what) {
  std::fprintf(stderr, "make_captures: %s\n", what);
  return false;
}

bool WriteOpcodes(const std::string& dir) {
  std::vector<Frame> frames;
  std::string listing;
  uint32_t psn = 100;
  auto add = [&](const OpcodeInfo& info, uint8_t version) {
    const size_t length = samples::PayloadLength(info, 1024);
    std::vector<uint8_t> payload(length);
    for (size_t i = 0; i < length; ++i) payload[i] = uint8_t(i);
    std::vector<uint8_t> ip(NetworkHeaderLength(version) + PacketLength(info, length));
    size_t written = 0;
    if (!EncodeDatagram(samples::Net(version), samples::Headers(info, psn), payload, ip, &written)
             .ok()) {
      return false;
    }
    frames.push_back(Ethernet(ip, version));
    listing += std::to_string(info.opcode) + " " + std::to_string(psn) + "\n";
    ++psn;
    return true;
  };
  for (const OpcodeInfo& info : AllOpcodes()) {
    if (!add(info, 4)) return Fail("cannot encode an opcode");
  }
  for (uint8_t opcode : {0x04, 0x11, 0x65}) {
    if (!add(*FindOpcode(opcode), 6)) return Fail("cannot encode an IPv6 opcode");
  }
  FILE* out = std::fopen((dir + "/opcodes.txt").c_str(), "w");
  if (out == nullptr) return Fail("cannot write opcodes.txt");
  std::fputs(listing.c_str(), out);
  std::fclose(out);
  return WritePcap(dir + "/opcodes.pcap", softrdma::tools::kLinkEthernet, frames);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  using softrdma::tools::kLinkEthernet;
  const std::vector<Frame> vectors = {Bytes(vectors::kVectorA), Bytes(vectors::kVectorB),
                                      Bytes(vectors::kVectorC), Bytes(vectors::kVectorD)};
  bool ok = true;

  std::vector<Frame> mixed = vectors;
  mixed.insert(mixed.begin() + 1, OtherUdpFrame());
  mixed.push_back(ArpFrame());
  ok &= WritePcap(dir + "/vectors.pcap", kLinkEthernet, mixed);

  std::vector<Frame> cooked;
  for (const Frame& frame : vectors) {
    const auto ip = std::span<const uint8_t>(frame).subspan(vectors::kEthernetHeaderSize);
    cooked.push_back(CookedV2(ip, uint8_t(ip[0] >> 4)));
  }
  ok &= WritePcap(dir + "/vectors_sll2.pcap", softrdma::tools::kLinkLinuxSll2, cooked);

  std::vector<Frame> corrupt = vectors;
  corrupt[0][0x37] ^= 0x01;  // 'e' of "Hello"
  ok &= WritePcap(dir + "/corrupt.pcap", kLinkEthernet, corrupt);

  ok &= WritePcap(dir + "/no_roce.pcap", kLinkEthernet, {OtherUdpFrame()});
  ok &= WriteOpcodes(dir);
  if (!ok) {
    Fail("cannot write the captures");
    return 1;
  }

  // A record whose captured length (40) is below its length on the wire.
  const Frame& a = vectors[0];
  std::vector<uint8_t> file;
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) file.push_back(uint8_t(v >> (8 * i)));
  };
  put32(0xA1B2C3D4);
  put32(0x00040002);  // version 2.4
  put32(0);
  put32(0);
  put32(40);  // snap length
  put32(kLinkEthernet);
  put32(0);
  put32(0);
  put32(40);
  put32(uint32_t(a.size()));
  file.insert(file.end(), a.begin(), a.begin() + 40);
  FILE* out = std::fopen((dir + "/truncated.pcap").c_str(), "wb");
  if (out == nullptr || std::fwrite(file.data(), 1, file.size(), out) != file.size()) {
    Fail("cannot write truncated.pcap");
    return 1;
  }
  std::fclose(out);
  return 0;
}
