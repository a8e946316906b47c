// rdma_bind_addr: port 0 picks a port, a taken port is refused, IPv6
// loopback binds; listening and connecting over IPv6 loopback.
#include <ifaddrs.h>
#include <net/if.h>

#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

TEST(CmBind, PortZeroPicksAPort) {
  RunScenario([] {
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in addr = Ipv4("127.0.0.1", 0);
    ASSERT_EQ(rdma_bind_addr(id, Sa(&addr)), 0) << strerror(errno);
    uint16_t port = SrcPort(id);
    EXPECT_NE(port, 0);
    // The bound address reads back with that port.
    const sockaddr* src = rdma_get_local_addr(id);
    ASSERT_EQ(src->sa_family, AF_INET);
    const auto* sin = reinterpret_cast<const sockaddr_in*>(src);
    EXPECT_EQ(ntohs(sin->sin_port), port);
    EXPECT_EQ(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    // A second id gets another port.
    rdma_cm_id* other = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &other, nullptr, RDMA_PS_TCP), 0);
    ASSERT_EQ(rdma_bind_addr(other, Sa(&addr)), 0) << strerror(errno);
    EXPECT_NE(SrcPort(other), 0);
    EXPECT_NE(SrcPort(other), port);
    EXPECT_EQ(rdma_destroy_id(other), 0);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  });
}

TEST(CmBind, TakenPortGivesEaddrinuse) {
  RunScenario([] {
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* first = nullptr;
    rdma_cm_id* second = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &first, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    ASSERT_EQ(rdma_create_id(ch, &second, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in addr = Ipv4("127.0.0.1", 0);
    ASSERT_EQ(rdma_bind_addr(first, Sa(&addr)), 0) << strerror(errno);
    addr.sin_port = htons(SrcPort(first));
    errno = 0;
    EXPECT_EQ(rdma_bind_addr(second, Sa(&addr)), -1);
    EXPECT_EQ(errno, EADDRINUSE);
    // Free again once the first id is gone.
    EXPECT_EQ(rdma_destroy_id(first), 0);
    EXPECT_EQ(rdma_bind_addr(second, Sa(&addr)), 0) << strerror(errno);
    EXPECT_EQ(rdma_destroy_id(second), 0);
    rdma_destroy_event_channel(ch);
  });
}

TEST(CmBind, TakenPortIsTakenForOtherProcessesToo) {
  RunScenario([] {
    std::unique_ptr<Peer> peer = StartPeer([](const Pipe& pipe) {
      rdma_event_channel* ch = NewChannel();
      ASSERT_NE(ch, nullptr);
      sockaddr_in addr = Ipv4("127.0.0.1", 0);
      rdma_cm_id* listener = NewListener(ch, Sa(&addr));
      ASSERT_NE(listener, nullptr);
      ASSERT_TRUE(pipe.Send(SrcPort(listener)));
      char done;
      ASSERT_TRUE(pipe.Recv(&done));
      EXPECT_EQ(rdma_destroy_id(listener), 0);
    });
    ASSERT_GT(peer->pid, 0);
    uint16_t port = 0;
    ASSERT_TRUE(peer->pipe.Recv(&port));
    rdma_cm_id* id = nullptr;
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in addr = Ipv4("127.0.0.1", port);
    errno = 0;
    EXPECT_EQ(rdma_bind_addr(id, Sa(&addr)), -1);
    EXPECT_EQ(errno, EADDRINUSE);
    ASSERT_TRUE(peer->pipe.Send('d'));
    peer->ExpectClean();
    EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  });
}

TEST(CmBind, Ipv6LoopbackBinds) {
  RunScenario([] {
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0) << strerror(errno);
    sockaddr_in6 addr = Ipv6("::1", 0);
    ASSERT_EQ(rdma_bind_addr(id, Sa(&addr)), 0) << strerror(errno);
    EXPECT_NE(SrcPort(id), 0);
    const sockaddr* src = rdma_get_local_addr(id);
    ASSERT_EQ(src->sa_family, AF_INET6);
    EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(src)->sin6_addr));
    EXPECT_EQ(rdma_listen(id, 4), 0) << strerror(errno);
    EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch);
  });
}

// Listens on `ip` (IPv6), connects to it, and moves a message.
void ConnectOverIpv6(const char* ip) {
  LoopbackPair pair;
  ASSERT_TRUE(pair.Prepare(RDMA_PS_TCP, ip));
  ASSERT_TRUE(pair.Establish());
  EXPECT_EQ(rdma_get_peer_addr(pair.client)->sa_family, AF_INET6);
  EXPECT_EQ(ntohs(rdma_get_dst_port(pair.client)), pair.port);
  const sockaddr* peer = rdma_get_peer_addr(pair.server);
  ASSERT_EQ(peer->sa_family, AF_INET6);
  in6_addr expected{};
  inet_pton(AF_INET6, ip, &expected);
  EXPECT_EQ(std::memcmp(&reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr, &expected, 16), 0);
  EXPECT_EQ(rdma_get_dst_port(pair.server), rdma_get_src_port(pair.client));
  Mem mem;
  ASSERT_TRUE(mem.Register(pair.pd, 64));
  ASSERT_EQ(PostRecv(pair.server->qp, &mem, 32, 32), 0);
  std::memcpy(mem.buf.data(), "over ipv6", 9);
  ASSERT_EQ(PostSend(pair.client->qp, &mem, 0, 9), 0);
  EXPECT_TRUE(ExpectCompletion(pair.client->send_cq, IBV_WC_SEND));
  ibv_wc wc{};
  ASSERT_TRUE(ExpectCompletion(pair.server->recv_cq, IBV_WC_RECV, &wc));
  EXPECT_EQ(wc.byte_len, 9u);
  EXPECT_EQ(std::memcmp(mem.buf.data() + 32, "over ipv6", 9), 0);
}

// A global IPv6 address of an interface that is up, or "" if none.
std::string HostIpv6Address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* ifa = list; ifa != nullptr && found.empty(); ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET6) continue;
    if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
    if (IN6_IS_ADDR_LINKLOCAL(&a) || IN6_IS_ADDR_LOOPBACK(&a)) continue;
    char text[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, &a, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(CmBind, ListenAndConnectOverTheHostsIpv6Address) {
  RunScenario([] {
    std::string ip = HostIpv6Address();
    if (ip.empty()) GTEST_SKIP() << "no global IPv6 address on an interface that is up";
    SCOPED_TRACE("address " + ip);
    ConnectOverIpv6(ip.c_str());
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test

namespace softrdma::rdmacm_test {
namespace {

// As librdmacm: an id has the device's PD in id->pd as soon as it has the
// device (bound to an address, resolved, or made by a request), and the
// PD of its QP once it has one. pyverbs allocates with id->pd before any QP.
TEST(CmIdPd, TheDevicesPdComesWithTheDeviceAndTheQpsPdWithTheQp) {
  RunScenario([] {
    rdma_event_channel* ch = NewChannel();
    ASSERT_NE(ch, nullptr);
    Events events(ch);
    sockaddr_in any = Ipv4("127.0.0.1", 0);
    rdma_cm_id* listener = NewListener(ch, Sa(&any));
    ASSERT_NE(listener, nullptr);
    ASSERT_NE(listener->verbs, nullptr);
    ASSERT_NE(listener->pd, nullptr);
    EXPECT_EQ(listener->pd->context, listener->verbs);
    // A UD QP made with id->pd works: an address handle on the same PD.
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ASSERT_EQ(ibv_query_gid(listener->verbs, 1, 0, &ah.grh.dgid), 0);
    ibv_ah* handle = ibv_create_ah(listener->pd, &ah);
    ASSERT_NE(handle, nullptr) << strerror(errno);
    EXPECT_EQ(ibv_destroy_ah(handle), 0);

    sockaddr_in dst = Ipv4("127.0.0.1", SrcPort(listener));
    rdma_cm_id* active = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &active, nullptr, RDMA_PS_TCP), 0);
    EXPECT_EQ(active->pd, nullptr);  // no device yet
    ASSERT_EQ(rdma_resolve_addr(active, nullptr, Sa(&dst), 2000), 0);
    ASSERT_TRUE(events.Await(RDMA_CM_EVENT_ADDR_RESOLVED, active).ok);
    EXPECT_EQ(active->pd, listener->pd);  // the device's one PD
    ibv_pd* own = ibv_alloc_pd(active->verbs);
    ASSERT_NE(own, nullptr);
    ASSERT_NE(NewQp(active, own), nullptr);
    EXPECT_EQ(active->pd, own);
    rdma_destroy_qp(active);
    EXPECT_EQ(rdma_destroy_id(active), 0);
    EXPECT_EQ(ibv_dealloc_pd(own), 0);
    EXPECT_EQ(rdma_destroy_id(listener), 0);
    rdma_destroy_event_channel(ch);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
