// ForwardingPort: a datagram whose DestQP another process owns goes to that
// process's port (here: two ports of this process with ids of their own)
// with its addresses intact; ours, unknown and QP1 datagrams stay; a vanished
// owner costs the datagram only; another user cannot inject.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "wire/roce/forwarding_port.h"

namespace softrdma::roce {
namespace {

// Hands out what a test put in, as if it came from the network.
class InjectPort : public PacketPort {
 public:
  struct Item {
    IpEndpoint from;
    in6_addr local;
    std::vector<uint8_t> bytes;
  };
  std::deque<Item>* queue = nullptr;
  int Send(const OutDatagram*, int n) override { return n; }
  int Poll(const DatagramSink& sink, int max) override {
    int n = 0;
    while (!queue->empty() && n < max) {
      const Item item = std::move(queue->front());
      queue->pop_front();
      InDatagram d;
      d.from = item.from;
      d.local = item.local;
      d.data = item.bytes.data();
      d.len = uint32_t(item.bytes.size());
      sink(d);
      ++n;
    }
    return n;
  }
};

std::vector<uint8_t> PacketTo(uint32_t qpn, uint8_t fill) {
  std::vector<uint8_t> p(40, fill);
  p[5] = uint8_t(qpn >> 16);
  p[6] = uint8_t(qpn >> 8);
  p[7] = uint8_t(qpn);
  return p;
}

struct Node {
  std::deque<InjectPort::Item> network;
  std::unique_ptr<ForwardingPort> port;
  std::vector<InjectPort::Item> got;
  void Open(const std::string& prefix, uint32_t id, ForwardingPort::ForeignOwner owner) {
    auto inner = std::make_unique<InjectPort>();
    inner->queue = &network;
    ASSERT_TRUE(ForwardingPort::Open(std::move(inner), prefix, id, std::move(owner), &port).ok());
  }
  int Poll() {
    return port->Poll(
        [&](const InDatagram& d) {
          got.push_back({d.from, d.local, {d.data, d.data + d.len}});
        },
        64);
  }
};

std::string UniquePrefix() {
  return "softrdma-test-" + std::to_string(getpid()) + "-roce-";
}

constexpr uint32_t kIdA = 1001, kIdB = 1002, kQpOfB = 0x20, kQpOfGone = 0x30;

uint32_t OwnerOf(uint32_t qpn) {
  if (qpn == kQpOfB || qpn == 1) return kIdB;  // QP1 must be ignored even so
  if (qpn == kQpOfGone) return 4242;           // nobody listens there
  return 0;
}

TEST(ForwardingPort, ForeignDatagramsReachTheirOwnerWithTheirAddresses) {
  const std::string prefix = UniquePrefix();
  Node a, b;
  a.Open(prefix, kIdA, OwnerOf);
  b.Open(prefix, kIdB, OwnerOf);
  InjectPort::Item item;
  item.from.addr.s6_addr[15] = 9;
  item.from.port = 4791;
  item.local.s6_addr[15] = 7;
  item.bytes = PacketTo(kQpOfB, 0xab);
  a.network.push_back(item);
  item.bytes = PacketTo(0x44, 0xcd);  // ours (the owner says 0)
  a.network.push_back(item);
  item.bytes = PacketTo(1, 0xef);  // QP1: never forwarded
  a.network.push_back(item);
  EXPECT_EQ(a.Poll(), 2);
  ASSERT_EQ(a.got.size(), 2u);
  EXPECT_EQ(a.got[0].bytes, PacketTo(0x44, 0xcd));
  EXPECT_EQ(a.got[1].bytes, PacketTo(1, 0xef));
  EXPECT_EQ(a.port->counters().forwarded, 1u);

  pollfd p{b.port->ReadableFd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 2000), 1);
  EXPECT_EQ(b.Poll(), 1);
  ASSERT_EQ(b.got.size(), 1u);
  EXPECT_EQ(b.got[0].bytes, PacketTo(kQpOfB, 0xab));
  EXPECT_EQ(memcmp(&b.got[0].from.addr, &item.from.addr, 16), 0);
  EXPECT_EQ(b.got[0].from.port, 4791);
  EXPECT_EQ(memcmp(&b.got[0].local, &item.local, 16), 0);
  EXPECT_EQ(b.port->counters().received_forwarded, 1u);
}

// The decorators answer for the port below (here the default: every address).
TEST(ForwardingPort, AddressIsOursIsThePortBelows) {
  Node a;
  a.Open(UniquePrefix(), kIdA, OwnerOf);
  EXPECT_TRUE(a.port->AddressIsOurs(in6_addr{}));
}

TEST(ForwardingPort, AVanishedOwnerCostsTheDatagramOnly) {
  Node a;
  a.Open(UniquePrefix(), kIdA, OwnerOf);
  a.network.push_back({{}, {}, PacketTo(kQpOfGone, 1)});
  a.network.push_back({{}, {}, {1, 2, 3}});  // too short for a BTH: the transport's to count
  EXPECT_EQ(a.Poll(), 1);
  EXPECT_EQ(a.port->counters().forward_failed, 1u);
}

TEST(ForwardingPort, TwoPortsCannotShareAnId) {
  const std::string prefix = UniquePrefix();
  Node a;
  a.Open(prefix, kIdA, OwnerOf);
  auto inner = std::make_unique<InjectPort>();
  std::unique_ptr<ForwardingPort> second;
  EXPECT_EQ(ForwardingPort::Open(std::move(inner), prefix, kIdA, OwnerOf, &second).code(),
            EADDRINUSE);
}

TEST(ForwardingPort, AnotherUserCannotInject) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to send as another uid";
  const std::string prefix = UniquePrefix();
  Node b;
  b.Open(prefix, kIdB, OwnerOf);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresuid(65534, 65534, 65534) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string name = prefix + std::to_string(kIdB);
    memcpy(address.sun_path + 1, name.data(), name.size());
    std::vector<uint8_t> message(40 + 40, 0);
    const uint32_t magic = 0x52465744;
    memcpy(message.data(), &magic, 4);
    const ssize_t sent =
        sendto(fd, message.data(), message.size(), 0, reinterpret_cast<sockaddr*>(&address),
               socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size()));
    _exit(sent == ssize_t(message.size()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  pollfd p{b.port->ReadableFd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 2000), 1);
  EXPECT_EQ(b.Poll(), 0);
  EXPECT_EQ(b.port->counters().refused, 1u);
}

}  // namespace
}  // namespace softrdma::roce
