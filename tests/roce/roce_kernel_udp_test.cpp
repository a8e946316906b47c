// What a kernel UDP socket puts on the wire, checked with the codec: the
// ICRC covers the IPv4 identification, and roce-wire.md §1.4 says an
// unconnected socket with IP_MTU_DISCOVER = IP_PMTUDISC_DO sends DF with
// ID 0, so a sender that computes the ICRC with ID 0 before sendto() gets a
// valid packet on the wire. The datagram is read back from the loopback
// interface through a packet socket (needs CAP_NET_RAW: skipped otherwise).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace softrdma::roce {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

const uint8_t kLoopback[4] = {127, 0, 0, 1};

// A packet socket on lo that sees every IPv4 packet sent through it.
int OpenLoopbackCapture() {
  const int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
  if (fd < 0) return -errno;
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_IP);
  address.sll_ifindex = int(if_nametoindex("lo"));
  if (address.sll_ifindex == 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

// Sends vector A's SEND from a UDP socket on 127.0.0.1 and returns what the
// kernel put on the wire, or an empty vector when it was not seen within 2 s.
std::vector<uint8_t> SendAndCapture(int capture, bool pmtu_discovery_do, uint16_t* source_port) {
  Fd sender(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_GE(sender.get(), 0);
  if (pmtu_discovery_do) {
    const int value = IP_PMTUDISC_DO;
    EXPECT_EQ(setsockopt(sender.get(), IPPROTO_IP, IP_MTU_DISCOVER, &value, sizeof value), 0);
  }
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(sender.get(), reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
  socklen_t length = sizeof local;
  EXPECT_EQ(getsockname(sender.get(), reinterpret_cast<sockaddr*>(&local), &length), 0);
  *source_port = ntohs(local.sin_port);

  NetworkHeaders net;
  net.src_gid = net.dst_gid = Ipv4MappedGid(kLoopback);
  net.ipv4_identification = 0;  // what IP_PMTUDISC_DO is expected to send
  net.udp_src_port = *source_port;
  TransportHeaders headers;
  headers.bth = Bth{.opcode = 0x04, .dest_qp = 0x12, .ack_req = true, .psn = 1};
  const uint8_t hello[] = {'H', 'e', 'l', 'l', 'o'};
  std::vector<uint8_t> packet(PacketLength(*FindOpcode(0x04), sizeof hello));
  size_t written = 0;
  EXPECT_TRUE(EncodePacket(net, headers, hello, packet, &written).ok());

  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  peer.sin_port = htons(kRoceUdpPort);
  EXPECT_EQ(sendto(sender.get(), packet.data(), packet.size(), 0,
                   reinterpret_cast<sockaddr*>(&peer), sizeof peer),
            ssize_t(packet.size()));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::vector<uint8_t> frame(2048);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{.fd = capture, .events = POLLIN, .revents = 0};
    if (poll(&ready, 1, 100) <= 0) continue;
    const ssize_t n = recv(capture, frame.data(), frame.size(), 0);
    if (n <= 0) continue;
    DatagramView view;
    const std::span<const uint8_t> ip(frame.data(), size_t(n));
    if (ParseDatagram(ip, &view).ok() && view.net.udp_src_port == *source_port) {
      return {frame.begin(), frame.begin() + n};
    }
  }
  return {};
}

TEST(RoceKernelUdp, UnconnectedSocketWithPmtuDiscoveryDoSendsIdZeroAndAValidIcrc) {
  const int fd = OpenLoopbackCapture();
  if (fd == -EPERM || fd == -EACCES) GTEST_SKIP() << "needs CAP_NET_RAW (run as root)";
  ASSERT_GE(fd, 0) << std::strerror(-fd);
  Fd capture(fd);
  uint16_t port = 0;
  const std::vector<uint8_t> ip = SendAndCapture(capture.get(), true, &port);
  ASSERT_FALSE(ip.empty()) << "the datagram was not seen on lo";
  DatagramView view;
  ASSERT_TRUE(ParseDatagram(ip, &view).ok());
  EXPECT_EQ(view.net.ipv4_identification, 0);
  EXPECT_EQ(view.net.ipv4_flags_fragment, 0x4000);  // DF
  PacketView packet;
  const Status status = ParsePacket(view.net, view.udp_payload, &packet);
  EXPECT_TRUE(status.ok()) << status.message();
}

// Without IP_PMTUDISC_DO the kernel picks the ID itself; the ICRC computed
// with ID 0 then holds only when the kernel happened to pick 0.
TEST(RoceKernelUdp, DefaultSocketIdIsTheKernelsAndBreaksAnIcrcComputedWithZero) {
  const int fd = OpenLoopbackCapture();
  if (fd == -EPERM || fd == -EACCES) GTEST_SKIP() << "needs CAP_NET_RAW (run as root)";
  ASSERT_GE(fd, 0) << std::strerror(-fd);
  Fd capture(fd);
  int nonzero_ids = 0;
  for (int i = 0; i < 3; ++i) {
    uint16_t port = 0;
    const std::vector<uint8_t> ip = SendAndCapture(capture.get(), false, &port);
    ASSERT_FALSE(ip.empty()) << "the datagram was not seen on lo";
    DatagramView view;
    ASSERT_TRUE(ParseDatagram(ip, &view).ok());
    PacketView packet;
    const int code = ParsePacket(view.net, view.udp_payload, &packet).code();
    EXPECT_EQ(code, view.net.ipv4_identification == 0 ? 0 : EILSEQ);
    nonzero_ids += view.net.ipv4_identification != 0;
  }
  RecordProperty("nonzero_ids", nonzero_ids);
}

}  // namespace
}  // namespace softrdma::roce
