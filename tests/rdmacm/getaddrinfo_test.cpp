// rdma_getaddrinfo / rdma_freeaddrinfo: a numeric address passive and
// active, the hints' source address carried into an active answer, the
// answer built from the hints alone when neither node nor service is given
// (as librdmacm does; pyverbs asks that way for a multicast group), and
// EINVAL with nothing to go on.

#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

uint16_t PortOfSa(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
}

TEST(CmGetAddrInfo, PassiveAndActiveNumericAddresses) {
  RunScenario([] {
    rdma_addrinfo hints{};
    hints.ai_flags = RAI_PASSIVE;
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo* passive = nullptr;
    ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7500", &hints, &passive), 0) << strerror(errno);
    ASSERT_NE(passive->ai_src_addr, nullptr);
    EXPECT_EQ(passive->ai_dst_addr, nullptr);
    EXPECT_EQ(PortOfSa(passive->ai_src_addr), 7500);

    rdma_addrinfo active_hints{};
    active_hints.ai_port_space = RDMA_PS_UDP;
    active_hints.ai_src_addr = passive->ai_src_addr;
    active_hints.ai_src_len = passive->ai_src_len;
    rdma_addrinfo* active = nullptr;
    ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7501", &active_hints, &active), 0);
    ASSERT_NE(active->ai_dst_addr, nullptr);
    EXPECT_EQ(PortOfSa(active->ai_dst_addr), 7501);
    ASSERT_NE(active->ai_src_addr, nullptr);
    EXPECT_EQ(PortOfSa(active->ai_src_addr), 7500);
    EXPECT_EQ(active->ai_port_space, RDMA_PS_UDP);
    rdma_freeaddrinfo(active);
    rdma_freeaddrinfo(passive);
  });
}

TEST(CmGetAddrInfo, NeitherNodeNorServiceAnswersWithTheHints) {
  RunScenario([] {
    sockaddr_in group = Ipv4("239.2.3.4", 0);
    sockaddr_in src = Ipv4("127.0.0.1", 0);
    rdma_addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_port_space = RDMA_PS_UDP;
    hints.ai_qp_type = IBV_QPT_UD;
    hints.ai_dst_addr = Sa(&group);
    hints.ai_dst_len = sizeof group;
    hints.ai_src_addr = Sa(&src);
    hints.ai_src_len = sizeof src;
    rdma_addrinfo* res = nullptr;
    ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0) << strerror(errno);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
    EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
    ASSERT_NE(res->ai_dst_addr, nullptr);
    ASSERT_EQ(res->ai_dst_len, sizeof group);
    EXPECT_EQ(std::memcmp(res->ai_dst_addr, &group, sizeof group), 0);
    EXPECT_NE(res->ai_dst_addr, Sa(&group));  // a copy, freed with the answer
    ASSERT_NE(res->ai_src_addr, nullptr);
    EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof src), 0);
    rdma_freeaddrinfo(res);

    EXPECT_EQ(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res), -1);
    EXPECT_EQ(errno, EINVAL);
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
