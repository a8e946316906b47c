// The real PacketPort (UdpPort) on this host's loopback addresses: datagrams
// of several parts go out and come back whole, in order, with the sender's
// address and port and the local address they came to; GSO batches over IPv6
// come back as separate datagrams; a flow source port is used; an address of
// another user's reuseport group is not ours; the MTU rule.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "wire/roce/packet.h"
#include "wire/roce/udp_port.h"

namespace softrdma::roce {
namespace {

in6_addr Address(const char* text) {
  std::vector<in6_addr> list;
  EXPECT_TRUE(ParseAddressList(text, &list).ok()) << text;
  return list.empty() ? in6_addr{} : list[0];
}

std::unique_ptr<UdpPort> OpenOn(const char* address, int* error = nullptr) {
  UdpPortOptions options;
  options.addresses = {Address(address)};
  options.port = 0;  // never the real 4791: other tests and programs may hold it
  std::unique_ptr<UdpPort> port;
  const Status s = UdpPort::Open(options, &port);
  if (error) *error = s.code();
  return port;
}

struct Received {
  IpEndpoint from;
  in6_addr local;
  std::vector<uint8_t> bytes;
  uint16_t gro_segment = 0;
};

// Polls until `count` datagrams came or 2 s passed.
std::vector<Received> Collect(UdpPort& port, size_t count) {
  std::vector<Received> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    const int n = port.Poll(
        [&](const InDatagram& d) {
          out.push_back({d.from, d.local, {d.data, d.data + d.len}, d.gro_segment});
        },
        64);
    if (n == 0) {
      pollfd p{port.ReadableFd(), POLLIN, 0};
      poll(&p, 1, 50);
    }
  }
  return out;
}

std::vector<uint8_t> Pattern(size_t length, uint8_t seed) {
  std::vector<uint8_t> v(length);
  for (size_t i = 0; i < length; ++i) v[i] = uint8_t(seed + i * 7);
  return v;
}

TEST(UdpPort, Ipv4DatagramsOfSeveralPartsArriveWholeAndInOrder) {
  auto a = OpenOn("127.0.0.1");
  auto b = OpenOn("127.0.0.1");
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->port(), b->port());
  const std::vector<uint8_t> header = Pattern(12, 1), payload = Pattern(1000, 2),
                             tail = Pattern(4, 3);
  OutDatagram out[3];
  for (int i = 0; i < 3; ++i) {
    out[i].to = {Address("127.0.0.1"), b->port()};
    out[i].parts[0] = {const_cast<uint8_t*>(header.data()), header.size()};
    out[i].parts[1] = {const_cast<uint8_t*>(payload.data()), size_t(100 * (i + 1))};
    out[i].parts[2] = {const_cast<uint8_t*>(tail.data()), tail.size()};
    out[i].nparts = 3;
  }
  ASSERT_EQ(a->Send(out, 3), 3);
  const auto got = Collect(*b, 3);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> expected = header;
    expected.insert(expected.end(), payload.begin(), payload.begin() + 100 * (i + 1));
    expected.insert(expected.end(), tail.begin(), tail.end());
    EXPECT_EQ(got[size_t(i)].bytes, expected) << i;
    EXPECT_EQ(memcmp(&got[size_t(i)].from.addr, &out[0].to.addr, 16), 0);
    EXPECT_EQ(got[size_t(i)].from.port, a->port());
    EXPECT_EQ(memcmp(&got[size_t(i)].local, &out[0].to.addr, 16), 0);
  }
  EXPECT_EQ(a->counters().sent, 3u);
  EXPECT_EQ(b->counters().received, 3u);
}

TEST(UdpPort, Ipv6EqualDatagramsGoAsOneGsoBatchAndArriveSeparately) {
  int error = 0;
  auto a = OpenOn("::1", &error);
  if (!a) GTEST_SKIP() << "no IPv6 loopback here (" << strerror(error) << ")";
  auto b = OpenOn("::1");
  ASSERT_TRUE(b);
  std::vector<std::vector<uint8_t>> bodies;
  OutDatagram out[11];
  for (int i = 0; i < 11; ++i) {
    bodies.push_back(Pattern(i == 10 ? 300 : 1052, uint8_t(i)));  // the last one shorter
    out[i].to = {Address("::1"), b->port()};
    out[i].parts[0] = {bodies.back().data(), bodies.back().size()};
    out[i].nparts = 1;
  }
  ASSERT_EQ(a->Send(out, 11), 11);
  EXPECT_EQ(a->counters().gso_batches, 1u);
  EXPECT_EQ(a->counters().send_calls, 1u);
  const auto got = Collect(*b, 11);
  ASSERT_EQ(got.size(), 11u);
  for (size_t i = 0; i < 11; ++i) EXPECT_EQ(got[i].bytes, bodies[i]) << i;
}

// Over IPv4 too, equal packets go as one GSO send; the kernel gives segment
// g the IPv4 ID g, so the port sends segment g's ICRC (computed for ID 0 by
// the caller) fixed by the delta of ID g, and leaves the caller's bytes alone.
TEST(UdpPort, Ipv4EqualPacketsGoAsOneGsoBatchWithTheirIcrcsFixedForTheirIds) {
  auto a = OpenOn("127.0.0.1");
  auto b = OpenOn("127.0.0.1");
  ASSERT_TRUE(a && b);
  NetworkHeaders net;
  net.ip_version = 4;
  const uint8_t loopback[4] = {127, 0, 0, 1};
  net.src_gid = net.dst_gid = Ipv4MappedGid(loopback);
  net.udp_src_port = a->port();
  net.udp_dst_port = b->port();
  std::vector<std::vector<uint8_t>> packets;
  OutDatagram out[6];
  for (int i = 0; i < 6; ++i) {
    TransportHeaders h;
    h.bth = Bth{.opcode = 0x07, .pkey = 0xFFFF, .dest_qp = 0x11, .psn = uint32_t(i)};
    const std::vector<uint8_t> payload = Pattern(1024, uint8_t(i));
    packets.emplace_back(12 + 1024 + kIcrcSize);
    size_t written = 0;
    ASSERT_TRUE(EncodePacket(net, h, payload, packets.back(), &written).ok());
    out[i].to = {Address("127.0.0.1"), b->port()};
    // Two parts, the ICRC in the second, as the transport hands them over.
    out[i].parts[0] = {packets.back().data(), 512};
    out[i].parts[1] = {packets.back().data() + 512, written - 512};
    out[i].nparts = 2;
  }
  const std::vector<std::vector<uint8_t>> sent = packets;
  ASSERT_EQ(a->Send(out, 6), 6);
  EXPECT_EQ(a->counters().gso_batches, 1u);
  EXPECT_EQ(a->counters().send_calls, 1u);
  EXPECT_EQ(packets, sent);  // the caller's memory unchanged
  const auto got = Collect(*b, 6);
  ASSERT_EQ(got.size(), 6u);
  for (size_t g = 0; g < 6; ++g) {
    const std::vector<uint8_t>& bytes = got[g].bytes;
    ASSERT_EQ(bytes.size(), sent[g].size());
    const size_t at = bytes.size() - kIcrcSize;
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.begin() + long(at), sent[g].begin())) << g;
    const uint32_t original = LoadIcrc(std::span<const uint8_t, kIcrcSize>(sent[g].data() + at, 4));
    const uint32_t received = LoadIcrc(std::span<const uint8_t, kIcrcSize>(bytes.data() + at, 4));
    EXPECT_EQ(received, original ^ Ipv4IdIcrcDelta(uint16_t(g), at)) << g;
    EXPECT_TRUE(VerifyIcrcAnyIpv4Id(net, bytes).ok()) << g;
    // Read whole (UDP_GRO), segment g of the send is segment g of the read:
    // the ID the receiver tries first.
    if (b->counters().gro_batches == 1) {
      EXPECT_EQ(got[g].gro_segment, g) << g;
      EXPECT_TRUE(VerifyIcrcAnyIpv4Id(net, bytes, got[g].gro_segment).ok()) << g;
    }
  }
}

TEST(UdpPort, FlowSourcePortIsTheUdpSourcePort) {
  auto a = OpenOn("127.0.0.1");
  auto b = OpenOn("127.0.0.1");
  ASSERT_TRUE(a && b);
  const uint16_t flow_port = 0xC132;  // roce-wire.md's example: QPs 0x11 and 0x12
  uint8_t byte = 7;
  OutDatagram d;
  d.to = {Address("127.0.0.1"), b->port()};
  d.src_port = flow_port;
  d.parts[0] = {&byte, 1};
  d.nparts = 1;
  ASSERT_EQ(a->Send(&d, 1), 1);
  const auto got = Collect(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  if (a->counters().source_port_fallbacks == 1)
    EXPECT_EQ(got[0].from.port, a->port()) << "port 0xC132 taken by another program here";
  else
    EXPECT_EQ(got[0].from.port, flow_port);
}

TEST(UdpPort, ReadableFdIsReadableOnlyWhileADatagramWaits) {
  auto a = OpenOn("127.0.0.1");
  auto b = OpenOn("127.0.0.1");
  ASSERT_TRUE(a && b);
  pollfd p{b->ReadableFd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  uint8_t byte = 1;
  OutDatagram d;
  d.to = {Address("127.0.0.1"), b->port()};
  d.parts[0] = {&byte, 1};
  d.nparts = 1;
  ASSERT_EQ(a->Send(&d, 1), 1);
  EXPECT_EQ(poll(&p, 1, 2000), 1);
  EXPECT_EQ(Collect(*b, 1).size(), 1u);
  EXPECT_EQ(poll(&p, 1, 0), 0);
}

TEST(UdpPort, AddressesAreOursOnlyWhenBound) {
  auto a = OpenOn("127.0.0.1");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->AddressIsOurs(Address("127.0.0.1")));
  EXPECT_FALSE(a->AddressIsOurs(Address("127.0.0.2")));
  EXPECT_FALSE(a->AddressIsOurs(Address("::1")));
}

TEST(UdpPort, SendFromAnAddressNotBoundIsRefused) {
  auto a = OpenOn("127.0.0.1");
  ASSERT_TRUE(a);
  uint8_t byte = 1;
  OutDatagram d;
  d.to = {Address("127.0.0.1"), a->port()};
  d.from = Address("127.0.0.2");
  d.parts[0] = {&byte, 1};
  d.nparts = 1;
  EXPECT_EQ(a->Send(&d, 1), -EADDRNOTAVAIL);
  d.to = {Address("::1"), a->port()};  // no IPv6 socket at all
  d.from = in6_addr{};
  EXPECT_EQ(a->Send(&d, 1), -EADDRNOTAVAIL);
}

TEST(UdpPort, AnAddressNotOfThisHostCannotBeBound) {
  int error = 0;
  EXPECT_FALSE(OpenOn("192.0.2.77", &error));
  EXPECT_EQ(error, EADDRNOTAVAIL);
}

TEST(UdpPort, TwoPortsOfOneUserShareAnAddressAndPort) {
  auto a = OpenOn("127.0.0.1");
  ASSERT_TRUE(a);
  UdpPortOptions options;
  options.addresses = {Address("127.0.0.1")};
  options.port = a->port();
  std::unique_ptr<UdpPort> b;
  EXPECT_TRUE(UdpPort::Open(options, &b).ok());  // SO_REUSEPORT, same uid
}

// The kernel lets only one uid into a reuseport group: a process of another
// user cannot bind the address and port we hold (so it is not its address).
// The kernel admits one uid to a reuseport group: another user's port on
// an address we hold cannot receive there, so it sends from a port of its
// own (SourcePort: the ICRC covers it) and says the address is not its own;
// what it sends reaches our group.
TEST(UdpPort, AnotherUserOnOurAddressSendsFromAPortOfItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another uid";
  auto a = OpenOn("127.0.0.1");
  ASSERT_TRUE(a);
  const uint16_t taken = a->port();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    const in6_addr loopback = Address("127.0.0.1");
    UdpPortOptions options;
    options.addresses = {loopback};
    options.port = taken;
    std::unique_ptr<UdpPort> b;
    if (!UdpPort::Open(options, &b).ok()) _exit(3);
    if (b->AddressIsOurs(loopback) || b->send_only_addresses().size() != 1) _exit(4);
    const uint16_t source = b->SourcePort(loopback);
    if (source == 0 || source == taken) _exit(5);
    uint8_t payload[16] = {0x64};
    OutDatagram d;
    d.to = {loopback, taken};
    d.from = loopback;
    d.src_port = source;
    d.parts[0] = {payload, sizeof payload};
    d.nparts = 1;
    if (b->Send(&d, 1) != 1) _exit(6);
    if (b->Poll([](const InDatagram&) {}, 16) != 0) _exit(7);  // receives nothing itself
    _exit(write(fds[1], &source, sizeof source) == sizeof source ? 0 : 8);
  }
  close(fds[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  uint16_t source = 0;
  ASSERT_EQ(read(fds[0], &source, sizeof source), ssize_t(sizeof source));
  close(fds[0]);
  const std::vector<Received> got = Collect(*a, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from.port, source);
  EXPECT_EQ(got[0].bytes.size(), 16u);
}

// Once the other user's processes have let the address's port go, the
// port binds it and receives there (within its 100 ms retry), still
// sending from its own source port.
TEST(UdpPort, AnotherUsersPortTakesTheAddressOnceItIsFree) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another uid";
  auto a = OpenOn("127.0.0.1");
  ASSERT_TRUE(a);
  const uint16_t taken = a->port();
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The copies of a's sockets fork gave us would keep the port held.
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != to_child[0] && fd != to_parent[1]) close(fd);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    const in6_addr loopback = Address("127.0.0.1");
    UdpPortOptions options;
    options.addresses = {loopback};
    options.port = taken;
    std::unique_ptr<UdpPort> b;
    if (!UdpPort::Open(options, &b).ok() || b->send_only_addresses().size() != 1) _exit(3);
    if (b->Poll([](const InDatagram&) {}, 16) != 0 || b->counters().late_binds != 0) _exit(4);
    char go = 0;
    if (write(to_parent[1], &go, 1) != 1 || read(to_child[0], &go, 1) != 1) _exit(5);
    uint8_t payload[8] = {0x64};
    OutDatagram d;
    d.to = {loopback, taken};
    d.from = loopback;
    d.src_port = b->SourcePort(loopback);
    d.parts[0] = {payload, sizeof payload};
    d.nparts = 1;
    int received = 0;
    for (int i = 0; i < 100 && received == 0; ++i) {
      if (b->Send(&d, 1) != 1) _exit(6);
      usleep(20000);
      received = b->Poll(
          [&](const InDatagram& in) {
            if (in.from.port != d.src_port) _exit(7);
          },
          16);
    }
    _exit(received > 0 && b->counters().late_binds == 1 ? 0 : 8);
  }
  char go = 0;
  ASSERT_EQ(read(to_parent[0], &go, 1), 1);
  a.reset();  // root's processes are gone: the port is free
  ASSERT_EQ(write(to_child[1], &go, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(UdpPort, ParseAddressList) {
  std::vector<in6_addr> list;
  ASSERT_TRUE(ParseAddressList(" 192.0.2.1, fd00::1 ,", &list).ok());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(IN6_IS_ADDR_V4MAPPED(&list[0]));
  EXPECT_EQ(list[0].s6_addr[15], 1);
  EXPECT_EQ(list[1].s6_addr[0], 0xfd);
  const Status bad = ParseAddressList("192.0.2.1,host.example", &list);
  EXPECT_EQ(bad.code(), EINVAL);
  EXPECT_NE(bad.message().find("host.example"), std::string::npos);
}

TEST(UdpPort, RoceMtuFollowsTheInterfaceMtuAsOnANic) {
  EXPECT_EQ(RoceMtuForInterfaceMtu(1500), 1024u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(9000), 4096u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(65536), 4096u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(4200), 4096u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(4175), 2048u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(336), 256u);
  EXPECT_EQ(RoceMtuForInterfaceMtu(335), 0u);
  EXPECT_GE(InterfaceMtuOfAddress(Address("127.0.0.1")), 1280u);  // lo
  EXPECT_EQ(InterfaceMtuOfAddress(Address("192.0.2.77")), 0u);
}

}  // namespace
}  // namespace softrdma::roce
