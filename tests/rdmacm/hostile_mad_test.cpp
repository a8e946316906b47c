// Malformed and hostile CM messages sent straight to a listener's socket
// (what any process of the host can do): dropped, never a crash, and the
// listener still accepts a real connection afterwards.
#include <sys/socket.h>
#include <sys/un.h>

#include <random>

#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// The name a listener of port space `ps` on `port` is reached at
// (src/cm/mad_port.cpp: per SOFTRDMA_NAMESPACE, not per user).
std::string ListenerSocketName(uint16_t ps, uint16_t port) {
  const char* ns = std::getenv("SOFTRDMA_NAMESPACE");
  char buf[160];
  std::snprintf(buf, sizeof(buf), "softrdma-%s-cm-%04x-%u", ns, unsigned(ps), unsigned(port));
  return buf;
}

void SendRaw(int fd, const std::string& name, const void* data, size_t len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  socklen_t addr_len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(sendto(fd, data, len, 0, reinterpret_cast<sockaddr*>(&addr), addr_len), ssize_t(len))
      << strerror(errno);
}

// A 256-byte MAD with the CM's header and attribute `attr`, the rest random.
std::vector<uint8_t> CmMad(uint16_t attr, std::mt19937* rng) {
  std::vector<uint8_t> mad(256);
  for (uint8_t& b : mad) b = uint8_t((*rng)());
  mad[0] = 1;     // base version
  mad[1] = 0x07;  // CM class
  mad[2] = 2;     // class version
  mad[3] = 0x03;  // Send
  mad[16] = uint8_t(attr >> 8);
  mad[17] = uint8_t(attr);
  return mad;
}

TEST(CmHostileMessages, DroppedAndTheListenerStillAccepts) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    std::string name = ListenerSocketName(RDMA_PS_TCP, pair.port);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    std::mt19937 rng(42);
    std::vector<uint8_t> junk(300);
    for (uint8_t& b : junk) b = uint8_t(rng());
    SendRaw(fd, name, junk.data(), 0);    // empty
    SendRaw(fd, name, junk.data(), 10);   // short
    SendRaw(fd, name, junk.data(), 255);  // one byte short of a MAD
    SendRaw(fd, name, junk.data(), 300);  // too long
    SendRaw(fd, name, junk.data(), 256);  // random header
    // Well-formed headers with bad contents: unknown attributes, a REQ with a
    // garbage IP header, a REP/RTU/DREP/REJ for nobody, a SIDR_REQ on an RC
    // listener, a DREQ for an unknown connection.
    for (uint16_t attr :
         {0x0001, 0x0019, 0x0099, 0x0010, 0x0013, 0x0014, 0x0016, 0x0012, 0x0011, 0x0017, 0x0015}) {
      for (int i = 0; i < 20; ++i) {
        std::vector<uint8_t> mad = CmMad(attr, &rng);
        SendRaw(fd, name, mad.data(), mad.size());
        usleep(200);  // a socket queues few datagrams: let the CM drain them
      }
    }
    close(fd);
    // Random REQs may have been taken as requests (a REQ with a valid IP
    // header by chance) or rejected; none may stop the listener. Read what
    // came and reject whatever requests arrived.
    for (;;) {
      Event e = pair.server_events->Next(200);
      if (!e.ok) break;
      if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_reject(e.id, nullptr, 0);
        rdma_destroy_id(e.id);
      }
    }
    ASSERT_TRUE(pair.Establish());
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
