// Private data: what a rejecter sends arrives with the REJECTED event, and
// the limits of each message (RC REQ 56 bytes after rdma_cm's 36-byte
// header, REP 196, REJ 148).
#include "rdmacm_fixture.h"

namespace softrdma::rdmacm_test {
namespace {

// IB CM REJ reason "consumer defined": rdma_reject's.
constexpr int kRejConsumerDefined = 28;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
  return v;
}

TEST(CmPrivateData, RejectDeliversTheRejectersPrivateData) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    ASSERT_EQ(rdma_connect(pair.client, nullptr), 0) << strerror(errno);
    ASSERT_TRUE(pair.AwaitRequest().ok);
    std::vector<uint8_t> data = Pattern(100, 3);
    ASSERT_EQ(rdma_reject(pair.server, data.data(), uint8_t(data.size())), 0) << strerror(errno);
    Event e = pair.client_events->Await(RDMA_CM_EVENT_REJECTED, pair.client);
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.status, kRejConsumerDefined);
    // The REJ's whole private data field, zero-padded, as the kernel reports it.
    ASSERT_EQ(e.private_data.size(), 148u);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), e.private_data.begin()));
    for (size_t i = data.size(); i < e.private_data.size(); ++i) {
      EXPECT_EQ(e.private_data[i], 0) << "byte " << i;
    }
  });
}

TEST(CmPrivateData, ConnectTakes56BytesNot57) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    std::vector<uint8_t> data = Pattern(57, 11);
    rdma_conn_param param{};
    param.private_data = data.data();
    param.private_data_len = 57;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    errno = 0;
    EXPECT_EQ(rdma_connect(pair.client, &param), -1);
    EXPECT_EQ(errno, EINVAL);
    // The refused call changed nothing: the same id connects with 56.
    param.private_data_len = 56;
    ASSERT_EQ(rdma_connect(pair.client, &param), 0) << strerror(errno);
    Event req = pair.AwaitRequest();
    ASSERT_TRUE(req.ok);
    ASSERT_EQ(req.private_data.size(), 56u);
    EXPECT_TRUE(std::equal(req.private_data.begin(), req.private_data.end(), data.begin()));
  });
}

TEST(CmPrivateData, AcceptTakes196BytesNot197) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    ASSERT_EQ(rdma_connect(pair.client, nullptr), 0) << strerror(errno);
    ASSERT_TRUE(pair.AwaitRequest().ok);
    ASSERT_NE(NewQp(pair.server, pair.pd), nullptr);
    std::vector<uint8_t> data = Pattern(197, 5);
    rdma_conn_param param{};
    param.private_data = data.data();
    param.private_data_len = 197;
    param.rnr_retry_count = 7;
    errno = 0;
    EXPECT_EQ(rdma_accept(pair.server, &param), -1);
    EXPECT_EQ(errno, EINVAL);
    param.private_data_len = 196;
    ASSERT_EQ(rdma_accept(pair.server, &param), 0) << strerror(errno);
    Event e = pair.client_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.client);
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.status, 0);
    ASSERT_EQ(e.private_data.size(), 196u);
    EXPECT_TRUE(std::equal(e.private_data.begin(), e.private_data.end(), data.begin()));
    EXPECT_TRUE(pair.server_events->Await(RDMA_CM_EVENT_ESTABLISHED, pair.server).ok);
  });
}

TEST(CmPrivateData, RejectTakes148BytesNot149) {
  RunScenario([] {
    LoopbackPair pair;
    ASSERT_TRUE(pair.Prepare());
    ASSERT_NE(NewQp(pair.client, pair.pd), nullptr);
    ASSERT_EQ(rdma_connect(pair.client, nullptr), 0) << strerror(errno);
    ASSERT_TRUE(pair.AwaitRequest().ok);
    std::vector<uint8_t> data = Pattern(149, 9);
    errno = 0;
    EXPECT_EQ(rdma_reject(pair.server, data.data(), 149), -1);
    EXPECT_EQ(errno, EINVAL);
    ASSERT_EQ(rdma_reject(pair.server, data.data(), 148), 0) << strerror(errno);
    Event e = pair.client_events->Await(RDMA_CM_EVENT_REJECTED, pair.client);
    ASSERT_TRUE(e.ok);
    EXPECT_EQ(e.status, kRejConsumerDefined);
    ASSERT_EQ(e.private_data.size(), 148u);
    EXPECT_TRUE(std::equal(e.private_data.begin(), e.private_data.end(), data.begin()));
  });
}

}  // namespace
}  // namespace softrdma::rdmacm_test
