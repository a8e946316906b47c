// softrdma_roce_icrc: checks the ICRC of every RoCEv2 packet in a classic
// pcap capture (issue 12, captures: tshark shows the ICRC but never checks
// it, roce-wire.md §9). Each IPv4/IPv6 UDP datagram to port 4791 is parsed
// with the codec (src/wire/roce) and its ICRC recomputed; other packets are
// skipped and counted.
//
//   softrdma_roce_icrc [-q] CAPTURE.pcap
//
// Prints one line per RoCEv2 packet (unless -q) and a summary. Exit status:
// 0 when the capture holds RoCEv2 packets and every one is well formed with
// a correct ICRC; 1 when any is not (bad ICRC, malformed, or cut by the
// capture's snap length so that it cannot be checked), or when there is no
// RoCEv2 packet at all; 2 on a usage error or an unreadable file.
#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "pcap_file.h"
#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace {

using namespace softrdma::roce;
using softrdma::Status;

std::string Address(const NetworkHeaders& net, const Gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (net.ip_version == 4) {
    inet_ntop(AF_INET, gid.data() + 12, text, sizeof text);
  } else {
    inet_ntop(AF_INET6, gid.data(), text, sizeof text);
  }
  return text;
}

struct Counts {
  unsigned good = 0;
  unsigned bad_icrc = 0;
  unsigned malformed = 0;
  unsigned truncated = 0;
  unsigned other = 0;
};

void CheckRecord(size_t number, uint32_t link_type, const softrdma::tools::PcapRecord& record,
                 bool quiet, Counts* counts) {
  const auto ip = softrdma::tools::IpPacketOf(link_type, record.data);
  DatagramView datagram;
  const Status framing =
      ip.empty() ? Status::Error(EPROTONOSUPPORT, "not IP") : ParseDatagram(ip, &datagram);
  if (framing.code() == EPROTONOSUPPORT) {
    ++counts->other;
    return;
  }
  const bool cut = record.data.size() < record.original_length;
  if (!framing.ok()) {
    ++(cut ? counts->truncated : counts->malformed);
    std::printf("%zu: %s: %s\n", number, cut ? "cut by the snap length" : "malformed datagram",
                framing.message().c_str());
    return;
  }
  PacketView packet;
  const Status transport = ParseTransport(datagram.udp_payload, &packet);
  const std::string route = Address(datagram.net, datagram.net.src_gid) + ":" +
                            std::to_string(datagram.net.udp_src_port) + " -> " +
                            Address(datagram.net, datagram.net.dst_gid);
  if (!transport.ok()) {
    ++counts->malformed;
    std::printf("%zu: %s malformed: %s\n", number, route.c_str(), transport.message().c_str());
    return;
  }
  const Status icrc = VerifyIcrc(datagram.net, datagram.udp_payload);
  if (icrc.ok()) {
    ++counts->good;
  } else {
    ++counts->bad_icrc;
  }
  if (!quiet || !icrc.ok()) {
    std::printf("%zu: %s %s qp 0x%06x psn %u ICRC 0x%08x %s\n", number, route.c_str(),
                packet.info->name, packet.headers.bth.dest_qp, packet.headers.bth.psn, packet.icrc,
                icrc.ok() ? "ok" : ("BAD: " + icrc.message()).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quiet = false;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-q") == 0) {
      quiet = true;
    } else if (path == nullptr && argv[i][0] != '-') {
      path = argv[i];
    } else {
      path = nullptr;
      break;
    }
  }
  if (path == nullptr) {
    std::fprintf(stderr, "usage: %s [-q] CAPTURE.pcap\n", argv[0]);
    return 2;
  }
  std::string error;
  const auto file = softrdma::tools::ReadPcap(path, &error);
  if (!file) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    return 2;
  }
  Counts counts;
  for (size_t i = 0; i < file->records.size(); ++i) {
    CheckRecord(i + 1, file->link_type, file->records[i], quiet, &counts);
  }
  const unsigned roce = counts.good + counts.bad_icrc + counts.malformed + counts.truncated;
  std::printf(
      "%u RoCEv2 packets: %u ICRC ok, %u bad ICRC, %u malformed, %u cut by the snap length; "
      "%u other packets skipped\n",
      roce, counts.good, counts.bad_icrc, counts.malformed, counts.truncated, counts.other);
  if (roce == 0) {
    std::printf("no RoCEv2 packet (UDP port 4791) in %s\n", path);
    return 1;
  }
  return counts.good == roce ? 0 : 1;
}
