// softrdma_roce_probe: RoCEv2 packets through the real UDP port, no QP.
//
//   softrdma_roce_probe serve --bind ADDR [--port P] --count N [--timeout S]
//   softrdma_roce_probe ping  --bind ADDR --to ADDR [--port P] --count N
//                             [--size BYTES] [--window W] [--timeout S]
//
// The client sends N RC SEND ONLY packets (PSN 0..N-1, AckReq, BYTES of
// payload, W at a time: one sendmmsg) from the flow source port of QPs 0x11
// and 0x12; the server checks each one's ICRC (computed with the addresses
// and ports it arrived with and any IPv4 ID 0..63: GSO), opcode, PSN and payload, and
// answers each with an ACK that the client checks the same way. Both exit 0
// when all N went through, 1 on any bad packet or after S seconds (default
// 5) without one, 2 on bad usage. The client prints the median and the
// 99th percentile round trip of a window. Used by tests/netns (a UDP
// exchange between two hosts, captures) and bench/ (UDP ping-pong).
#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wire/roce/packet.h"
#include "wire/roce/udp_port.h"

using namespace softrdma;
using namespace softrdma::roce;

namespace {

constexpr uint32_t kClientQpn = 0x11, kServerQpn = 0x12;
constexpr uint8_t kSendOnly = 0x04, kAcknowledge = 0x11;

// roce-wire.md §1.5: the source port both ends derive from the two QPNs.
uint16_t FlowSourcePort(uint32_t a, uint32_t b) {
  uint64_t v = uint64_t(a) * b;
  v ^= v >> 20;
  v ^= v >> 40;
  const uint32_t label = uint32_t(v & 0xFFFFF);
  return uint16_t(((label & 0x3FFF) ^ ((label & 0xFC000) >> 14)) | 0xC000);
}

struct Args {
  std::string mode, bind, to;
  uint16_t port = kRoceUdpPort;
  uint32_t count = 0, size = 64, window = 1, timeout_s = 5;
};

int Usage() {
  fprintf(
      stderr,
      "usage: softrdma_roce_probe serve --bind ADDR [--port P] --count N [--timeout S]\n"
      "       softrdma_roce_probe ping --bind ADDR --to ADDR [--port P] --count N [--size BYTES]"
      " [--window W] [--timeout S]\n");
  return 2;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    const unsigned long number = strtoul(value.c_str(), nullptr, 0);
    if (key == "--bind")
      a->bind = value;
    else if (key == "--to")
      a->to = value;
    else if (key == "--port")
      a->port = uint16_t(number);
    else if (key == "--count")
      a->count = uint32_t(number);
    else if (key == "--size")
      a->size = uint32_t(number);
    else if (key == "--window")
      a->window = uint32_t(number);
    else if (key == "--timeout")
      a->timeout_s = uint32_t(number);
    else
      return false;
  }
  if ((argc - 2) % 2 != 0 || a->bind.empty() || a->count == 0) return false;
  if (a->mode == "ping" && (a->to.empty() || a->window == 0 || a->size > kMaxPayload)) return false;
  return a->mode == "serve" || a->mode == "ping";
}

Gid GidOf(const in6_addr& a) {
  Gid g;
  memcpy(g.data(), &a, 16);
  return g;
}

// The network headers a received datagram had on the wire, as far as a UDP
// socket tells (IPv4 ID 0: our senders use IP_PMTUDISC_DO).
NetworkHeaders HeadersOf(const InDatagram& d, uint16_t port) {
  NetworkHeaders net;
  net.src_gid = GidOf(d.from.addr);
  net.dst_gid = GidOf(d.local);
  net.ip_version = IsIpv4Mapped(net.src_gid) ? 4 : 6;
  net.udp_src_port = d.from.port;
  net.udp_dst_port = port;
  return net;
}

// Encodes a whole packet for `to` from `from` into `out`.
size_t Encode(const in6_addr& from, const in6_addr& to, uint16_t port, const TransportHeaders& h,
              const std::vector<uint8_t>& payload, std::vector<uint8_t>* out) {
  NetworkHeaders net;
  net.src_gid = GidOf(from);
  net.dst_gid = GidOf(to);
  net.ip_version = IsIpv4Mapped(net.src_gid) ? 4 : 6;
  net.udp_src_port = FlowSourcePort(kClientQpn, kServerQpn);
  net.udp_dst_port = port;
  out->resize(kMaxTransportHeaderLength + kMaxPayload + 8);
  size_t written = 0;
  const Status s = EncodePacket(net, h, payload, *out, &written);
  if (!s.ok()) {
    fprintf(stderr, "encode: %s\n", s.message().c_str());
    exit(1);
  }
  out->resize(written);
  return written;
}

uint8_t PayloadByte(uint32_t psn, size_t i) {
  return uint8_t(psn * 31 + i);
}

class Prober {
 public:
  Prober(const Args& args, std::unique_ptr<UdpPort> port, in6_addr local)
      : args_(args), port_(std::move(port)), local_(local) {}

  // Polls until at least `want` packets were handled by `on_packet` (false =
  // bad) or the timeout passed without any.
  template <typename OnPacket>
  bool Receive(uint32_t want, OnPacket on_packet) {
    uint32_t got = 0;
    bool good = true;
    while (got < want && good) {
      const int n = port_->Poll(
          [&](const InDatagram& d) {
            good = on_packet(d) && good;  // a GRO read may hold more than asked
            ++got;
          },
          int(want - got));
      if (n > 0) continue;
      pollfd p{port_->ReadableFd(), POLLIN, 0};
      if (poll(&p, 1, int(args_.timeout_s * 1000)) == 0) {
        fprintf(stderr, "timeout: %u of %u packets came within %u s\n", got, want, args_.timeout_s);
        return false;
      }
    }
    return good;
  }

  bool Check(const InDatagram& d, uint8_t opcode, uint32_t psn, PacketView* view) {
    // The IPv4 ID is not known here (GSO segments: 0, 1, 2...).
    Status s = ParseTransport({d.data, d.len}, view);
    if (s.ok()) s = VerifyIcrcAnyIpv4Id(HeadersOf(d, args_.port), {d.data, d.len});
    if (!s.ok()) {
      fprintf(stderr, "bad packet (psn %u expected): %s\n", psn, s.message().c_str());
      return false;
    }
    if (view->info->opcode != opcode || view->headers.bth.psn != psn) {
      fprintf(stderr, "got opcode 0x%02x psn %u, expected 0x%02x psn %u\n", view->info->opcode,
              view->headers.bth.psn, opcode, psn);
      return false;
    }
    return true;
  }

  void SendAll(std::vector<std::vector<uint8_t>>& packets, const IpEndpoint& to) {
    std::vector<OutDatagram> out(packets.size());
    for (size_t i = 0; i < packets.size(); ++i) {
      out[i].to = to;
      out[i].from = local_;
      out[i].src_port = FlowSourcePort(kClientQpn, kServerQpn);
      out[i].parts[0] = {packets[i].data(), packets[i].size()};
      out[i].nparts = 1;
    }
    size_t done = 0;
    while (done < out.size()) {
      const int n = port_->Send(out.data() + done, int(out.size() - done));
      if (n < 0) {
        fprintf(stderr, "send: %s\n", strerror(-n));
        exit(1);
      }
      done += size_t(n);
      if (done < out.size()) {
        pollfd p{port_->ReadableFd(), 0, 0};
        poll(&p, 1, 1);  // socket buffer full: let the kernel drain it
      }
    }
  }

  int Serve() {
    uint32_t expected = 0;
    while (expected < args_.count) {
      std::vector<std::vector<uint8_t>> acks;
      IpEndpoint peer;
      const bool ok = Receive(1, [&](const InDatagram& d) {
        PacketView v;
        if (!Check(d, kSendOnly, expected, &v)) return false;
        for (size_t i = 0; i < v.payload.size(); ++i)
          if (v.payload[i] != PayloadByte(expected, i)) {
            fprintf(stderr, "psn %u: payload byte %zu differs\n", expected, i);
            return false;
          }
        TransportHeaders h;
        h.bth.opcode = kAcknowledge;
        h.bth.dest_qp = kClientQpn;
        h.bth.psn = expected;
        h.aeth.msn = expected + 1;
        acks.emplace_back();
        Encode(d.local, d.from.addr, args_.port, h, {}, &acks.back());
        peer = {d.from.addr, args_.port};
        ++expected;
        return true;
      });
      if (!ok) return 1;
      SendAll(acks, peer);
    }
    printf("served %u packets, every ICRC and PSN good\n", args_.count);
    return 0;
  }

  int Ping(const in6_addr& to) {
    std::vector<double> round_trips_us;
    for (uint32_t first = 0; first < args_.count; first += args_.window) {
      const uint32_t n = std::min(args_.window, args_.count - first);
      std::vector<std::vector<uint8_t>> packets(n);
      for (uint32_t k = 0; k < n; ++k) {
        TransportHeaders h;
        h.bth.opcode = kSendOnly;
        h.bth.dest_qp = kServerQpn;
        h.bth.psn = first + k;
        h.bth.ack_req = true;
        std::vector<uint8_t> payload(args_.size);
        for (size_t i = 0; i < payload.size(); ++i) payload[i] = PayloadByte(first + k, i);
        Encode(local_, to, args_.port, h, payload, &packets[k]);
      }
      const auto start = std::chrono::steady_clock::now();
      SendAll(packets, {to, args_.port});
      uint32_t next = first;
      const bool ok = Receive(n, [&](const InDatagram& d) {
        PacketView v;
        return Check(d, kAcknowledge, next++, &v);
      });
      if (!ok) return 1;
      round_trips_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(round_trips_us.begin(), round_trips_us.end());
    const double median = round_trips_us[round_trips_us.size() / 2];
    const double p99 =
        round_trips_us[std::min(round_trips_us.size() - 1, round_trips_us.size() * 99 / 100)];
    printf(
        "%u packets of %u bytes acknowledged, every ICRC and PSN good; round trip of %u: median "
        "%.1f us, p99 %.1f us\n",
        args_.count, args_.size, args_.window, median, p99);
    return 0;
  }

 private:
  Args args_;
  std::unique_ptr<UdpPort> port_;
  in6_addr local_;
};

bool ParseOne(const std::string& text, in6_addr* out) {
  std::vector<in6_addr> list;
  if (!ParseAddressList(text, &list).ok() || list.size() != 1) return false;
  *out = list[0];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) return Usage();
  in6_addr local{}, to{};
  if (!ParseOne(args.bind, &local) || (args.mode == "ping" && !ParseOne(args.to, &to)))
    return Usage();
  UdpPortOptions options;
  options.addresses = {local};
  options.port = args.port;
  std::unique_ptr<UdpPort> port;
  if (Status s = UdpPort::Open(options, &port); !s.ok()) {
    fprintf(stderr, "softrdma_roce_probe: %s\n", s.message().c_str());
    return 1;
  }
  Prober prober(args, std::move(port), local);
  return args.mode == "serve" ? prober.Serve() : prober.Ping(to);
}
