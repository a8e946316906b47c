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

#include <algorithm>
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
  void Open(const std::string& prefix, uint32_t id, ForwardingPort::ForeignOwner owner,
            const ForwardingPort::Gateway* gateway = nullptr) {
    auto inner = std::make_unique<InjectPort>();
    inner->queue = &network;
    ASSERT_TRUE(
        ForwardingPort::Open(std::move(inner), prefix, id, std::move(owner), &port, gateway).ok());
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

// The abstract name a port binds (the leading NUL is added here), to send
// to as any process of any user could.
struct AbstractAddress {
  sockaddr_un address{};
  socklen_t length = 0;
  explicit AbstractAddress(const std::string& name) {
    address.sun_family = AF_UNIX;
    memcpy(address.sun_path + 1, name.data(), name.size());
    length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  }
  ssize_t SendFrom(int fd, const std::vector<uint8_t>& message) const {
    return sendto(fd, message.data(), message.size(), 0,
                  reinterpret_cast<const sockaddr*>(&address), length);
  }
};

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
    std::vector<uint8_t> message(40 + 40, 0);
    const uint32_t magic = 0x52465744;
    memcpy(message.data(), &magic, 4);
    const ssize_t sent = AbstractAddress(prefix + std::to_string(kIdB)).SendFrom(fd, message);
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

// --- Registry gateways: QPNs of another range (another user's registry)
// go to that range's gateway, held by one process of the registry.

// QPN ranges as host/qpn_range.h makes them: the slot above 17 index bits.
uint32_t SlotOf(uint32_t qpn) {
  return qpn >> 17;
}
constexpr uint32_t kSlotA = 3, kSlotB = 5;
constexpr uint32_t kQpOfRangeB = (kSlotB << 17) | 0x20;

ForwardingPort::Gateway GatewayOf(uint32_t slot, const std::string& prefix) {
  return ForwardingPort::Gateway{prefix + "gw-", slot, SlotOf};
}

uint32_t NoOtherOwner(uint32_t) {
  return 0;
}

void WaitReadable(const ForwardingPort& port) {
  pollfd p{port.ReadableFd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 2000), 1);
}

// A record of a batch for a gateway: forwarding_port.cpp's ForwardHeader
// (magic, source port, length, two addresses), then the datagram.
std::vector<uint8_t> GatewayRecord(const std::vector<uint8_t>& packet) {
  std::vector<uint8_t> record(40, 0);
  const uint32_t magic = 0x32465752;
  memcpy(record.data(), &magic, 4);
  const uint16_t length = uint16_t(packet.size());
  memcpy(record.data() + 6, &length, 2);
  record.insert(record.end(), packet.begin(), packet.end());
  return record;
}

TEST(RegistryGateway, ADatagramOfAnotherRangeReachesThatRangesGateway) {
  const std::string prefix = UniquePrefix();
  const auto gateway_a = GatewayOf(kSlotA, prefix), gateway_b = GatewayOf(kSlotB, prefix);
  Node a, b;
  a.Open(prefix, kIdA, NoOtherOwner, &gateway_a);
  b.Open(prefix, kIdB, NoOtherOwner, &gateway_b);
  EXPECT_TRUE(a.port->holds_gateway());
  EXPECT_TRUE(b.port->holds_gateway());
  InjectPort::Item item;
  item.from.addr.s6_addr[15] = 9;
  item.from.port = 50123;
  item.local.s6_addr[15] = 7;
  item.bytes = PacketTo(kQpOfRangeB, 0xab);
  a.network.push_back(item);
  item.bytes = PacketTo((kSlotA << 17) | 0x44, 0xcd);  // of a's range: stays
  a.network.push_back(item);
  item.bytes = PacketTo(0xffffff, 0x11);  // multicast (its slot 127 is no registry's): stays
  a.network.push_back(item);
  EXPECT_EQ(a.Poll(), 2);
  EXPECT_EQ(a.port->counters().to_gateway, 1u);

  WaitReadable(*b.port);
  EXPECT_EQ(b.Poll(), 1);
  ASSERT_EQ(b.got.size(), 1u);
  EXPECT_EQ(b.got[0].bytes, PacketTo(kQpOfRangeB, 0xab));
  EXPECT_EQ(memcmp(&b.got[0].from.addr, &item.from.addr, 16), 0);
  EXPECT_EQ(b.got[0].from.port, 50123) << "the ICRC covers the source port";
  EXPECT_EQ(memcmp(&b.got[0].local, &item.local, 16), 0);
  EXPECT_EQ(b.port->counters().via_gateway, 1u);
}

// What one poll forwards to one process goes as one Unix datagram: a burst
// longer than the socket's queue of 10 (max_dgram_qlen) arrives whole.
TEST(ForwardingPort, ABurstTravelsInOneUnixDatagram) {
  const std::string prefix = UniquePrefix();
  Node a, b;
  a.Open(prefix, kIdA, OwnerOf);
  b.Open(prefix, kIdB, OwnerOf);
  for (int i = 0; i < 64; ++i) {
    std::vector<uint8_t> packet = PacketTo(kQpOfB, uint8_t(i));
    packet.resize(1024 + 40, uint8_t(i));
    a.network.push_back({{}, {}, packet});
  }
  EXPECT_EQ(a.Poll(), 0);
  EXPECT_EQ(a.port->counters().forwarded, 64u);
  EXPECT_EQ(a.port->counters().forward_failed, 0u);
  EXPECT_EQ(a.port->counters().batches_sent, 2u) << "64 KiB per Unix datagram";
  WaitReadable(*b.port);
  EXPECT_EQ(b.Poll(), 64);
  ASSERT_EQ(b.got.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(b.got[size_t(i)].bytes.size(), 1064u);
    EXPECT_EQ(b.got[size_t(i)].bytes.back(), uint8_t(i)) << "in order, whole";
  }
}

TEST(RegistryGateway, NoGatewayCostsTheDatagramOnly) {
  const std::string prefix = UniquePrefix();
  const auto gateway_a = GatewayOf(kSlotA, prefix);
  Node a;
  a.Open(prefix, kIdA, NoOtherOwner, &gateway_a);
  a.network.push_back({{}, {}, PacketTo(kQpOfRangeB, 1)});
  EXPECT_EQ(a.Poll(), 0);
  EXPECT_EQ(a.port->counters().to_gateway_failed, 1u);
}

// The gateway hands a datagram on to the process of its registry that owns
// the QPN; one process holds it, and another takes it over when it goes.
TEST(RegistryGateway, OneHolderHandsOnToTheOwnerAndAnotherTakesOver) {
  const std::string prefix = UniquePrefix();
  const auto gateway_a = GatewayOf(kSlotA, prefix), gateway_b = GatewayOf(kSlotB, prefix);
  auto owned_by_c = [](uint32_t qpn) { return qpn == kQpOfRangeB ? 1003u : 0u; };
  Node a, b, c;
  a.Open(prefix, kIdA, NoOtherOwner, &gateway_a);
  b.Open(prefix, kIdB, owned_by_c, &gateway_b);
  c.Open(prefix, 1003, NoOtherOwner, &gateway_b);
  EXPECT_TRUE(b.port->holds_gateway());
  EXPECT_FALSE(c.port->holds_gateway()) << "one holder per range";

  a.network.push_back({{}, {}, PacketTo(kQpOfRangeB, 2)});
  EXPECT_EQ(a.Poll(), 0);
  WaitReadable(*b.port);
  EXPECT_EQ(b.Poll(), 0);
  EXPECT_EQ(b.port->counters().via_gateway, 1u);
  EXPECT_EQ(b.port->counters().forwarded, 1u);
  WaitReadable(*c.port);
  EXPECT_EQ(c.Poll(), 1);
  ASSERT_EQ(c.got.size(), 1u);
  EXPECT_EQ(c.got[0].bytes, PacketTo(kQpOfRangeB, 2));

  b.port.reset();  // the holder exits
  for (int i = 0; i < 100 && !c.port->holds_gateway(); ++i) {
    usleep(10000);
    c.Poll();
  }
  EXPECT_TRUE(c.port->holds_gateway()) << "taken over within 1 s";
  a.network.push_back({{}, {}, PacketTo(kQpOfRangeB, 3)});
  EXPECT_EQ(a.Poll(), 0);
  WaitReadable(*c.port);
  EXPECT_EQ(c.Poll(), 1);
  ASSERT_EQ(c.got.size(), 2u);
  EXPECT_EQ(c.got[1].bytes, PacketTo(kQpOfRangeB, 3));
}

// A gateway takes datagrams of its own range only: nothing travels on to a
// third registry (no loops), nothing of another range is delivered here.
TEST(RegistryGateway, AGatewayRefusesAnotherRangesDatagrams) {
  const std::string prefix = UniquePrefix();
  const auto gateway_a = GatewayOf(kSlotA, prefix), gateway_b = GatewayOf(kSlotB, prefix);
  Node a, b;
  a.Open(prefix, kIdA, NoOtherOwner, &gateway_a);
  b.Open(prefix, kIdB, NoOtherOwner, &gateway_b);
  // A process of range A that believes a QPN of range 7 is B's: send it to
  // B's gateway by hand, as a confused or hostile process could.
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  const std::vector<uint8_t> message = GatewayRecord(PacketTo((7u << 17) | 0x20, 4));
  const ssize_t sent =
      AbstractAddress(gateway_b.prefix + std::to_string(kSlotB)).SendFrom(fd, message);
  close(fd);
  ASSERT_EQ(sent, ssize_t(message.size()));
  WaitReadable(*b.port);
  EXPECT_EQ(b.Poll(), 0);
  EXPECT_EQ(b.port->counters().gateway_refused, 1u);
}

// A gateway reads what any user's process sends it: batches of (header,
// datagram) records that may be cut, lie about their lengths, or be noise.
// 3000 batches mutated from a well-formed one (a seeded generator: a failure
// repeats): never a crash, every non-empty batch counted (delivered or
// refused), and every datagram delivered is bytes the batch held, of our
// range.
TEST(RegistryGateway, MalformedBatchesAreRefusedOrDeliveredWithinTheirBytes) {
  const std::string prefix = UniquePrefix();
  const auto gateway_b = GatewayOf(kSlotB, prefix);
  Node b;
  b.Open(prefix, kIdB, NoOtherOwner, &gateway_b);
  ASSERT_TRUE(b.port->holds_gateway());
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  const AbstractAddress gateway(gateway_b.prefix + std::to_string(kSlotB));
  // Three well-formed records.
  std::vector<uint8_t> good;
  for (uint8_t fill : {0x21, 0x22, 0x23}) {
    const std::vector<uint8_t> record = GatewayRecord(PacketTo(kQpOfRangeB, fill));
    good.insert(good.end(), record.begin(), record.end());
  }
  uint64_t state = 0x5eed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> message = good;
    switch (next() % 5) {
      case 0:  // cut anywhere
        message.resize(1 + next() % message.size());
        break;
      case 1: {  // a record's length field: 0, short, long, huge
        const size_t record = 80 * (next() % 3);
        const uint16_t length = uint16_t(next());
        memcpy(message.data() + record + 6, &length, 2);
        break;
      }
      case 2:  // bytes flipped anywhere (magic, lengths, BTH)
        for (int n = 1 + int(next() % 8); n > 0; --n)
          message[next() % message.size()] ^= uint8_t(next());
        break;
      case 3:  // noise of any length
        message.resize(1 + next() % 400);
        for (uint8_t& byte : message) byte = uint8_t(next());
        break;
      case 4:  // a well-formed batch with trailing bytes
        message.resize(message.size() + 1 + next() % 50, uint8_t(next()));
        break;
    }
    const auto before = b.port->counters();
    ASSERT_EQ(gateway.SendFrom(fd, message), ssize_t(message.size()));
    WaitReadable(*b.port);
    b.got.clear();
    b.Poll();
    const auto after = b.port->counters();
    ASSERT_GT(after.via_gateway + after.gateway_refused,
              before.via_gateway + before.gateway_refused)
        << "batch " << i << " was neither delivered nor refused";
    ASSERT_EQ(after.via_gateway - before.via_gateway, b.got.size()) << "batch " << i;
    for (const InjectPort::Item& d : b.got) {
      ASSERT_GE(d.bytes.size(), 12u) << "batch " << i;
      EXPECT_EQ(SlotOf(uint32_t(d.bytes[5]) << 16 | uint32_t(d.bytes[6]) << 8 | d.bytes[7]),
                kSlotB);
      EXPECT_NE(std::search(message.begin(), message.end(), d.bytes.begin(), d.bytes.end()),
                message.end())
          << "batch " << i << ": a datagram delivered that the batch did not hold";
    }
  }
  close(fd);
}

// Another user's process may hand datagrams to our gateway (it received
// them on its UDP port): they are delivered like the network's, where the
// per-process socket refuses another uid.
TEST(RegistryGateway, AnotherUsersProcessReachesTheGateway) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to send as another uid";
  const std::string prefix = UniquePrefix();
  const auto gateway_b = GatewayOf(kSlotB, prefix);
  Node b;
  b.Open(prefix, kIdB, NoOtherOwner, &gateway_b);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresuid(65534, 65534, 65534) != 0) _exit(2);
    auto inner = std::make_unique<InjectPort>();
    std::deque<InjectPort::Item> network;
    network.push_back({{}, {}, PacketTo(kQpOfRangeB, 5)});
    inner->queue = &network;
    const auto gateway_a = GatewayOf(kSlotA, prefix);
    std::unique_ptr<ForwardingPort> a;
    if (!ForwardingPort::Open(std::move(inner), prefix, kIdA, NoOtherOwner, &a, &gateway_a).ok())
      _exit(3);
    a->Poll([](const InDatagram&) {}, 64);
    _exit(a->counters().to_gateway == 1 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  WaitReadable(*b.port);
  EXPECT_EQ(b.Poll(), 1);
  ASSERT_EQ(b.got.size(), 1u);
  EXPECT_EQ(b.got[0].bytes, PacketTo(kQpOfRangeB, 5));
  EXPECT_EQ(b.port->counters().via_gateway, 1u);
}

}  // namespace
}  // namespace softrdma::roce
