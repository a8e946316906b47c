// QP1 on the RoCE wire (transport/roce/roce_gsi.h) over an in-process packet
// port that hands every datagram back to this process (fake_packet_port.h):
// a UD SEND to QPN 1 at another host's address leaves as one UD SEND_ONLY
// packet to destination QP 1 with the GSI Q_Key whatever the WR said, and a
// packet for QP1 that arrives is handed by the GSI forwarder to the CM
// socket of the process it is for; a request nobody listens for is answered
// REJ "invalid service ID" back through QP1 to the requester's socket.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/verbs.h"
#include "engine_test_support.h"
#include "fake_packet_port.h"
#include "host/gsi_forwarder.h"
#include "host/registry.h"
#include "transport/engine.h"
#include "util/clock.h"
#include "util/gsi_route.h"
#include "wire/roce/packet.h"
#include "wire/shm/shm_region.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::FakePacketPort;
using testing::LoopbackGid;

constexpr uint16_t kTcpPs = 0x0106;
// Another host's address (TEST-NET-1): not in our GID table.
constexpr uint8_t kOtherHost[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 99};

// A bound abstract socket with a CM name, as the CM's.
class CmSocket {
 public:
  explicit CmSocket(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path + 1, name.data(), name.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr),
                  socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0;
  }
  ~CmSocket() { close(fd_); }
  bool bound() const { return bound_; }
  ssize_t Read(uint8_t* buf, size_t len) { return recv(fd_, buf, len, MSG_DONTWAIT); }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class RoceGsi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::UseOwnNamespace(); }
  // The engine attached to that namespace's registry: remove it.
  static void TearDownTestSuite() { testing::RemoveOwnRegistry(); }
  void SetUp() override {
    Status err;
    engine_ = Engine::Get(&err);
    ASSERT_NE(engine_, nullptr);
    auto port = std::make_unique<FakePacketPort>();
    port_ = port.get();
    port_->SetDropIf([this](const std::vector<uint8_t>& bytes, uint64_t) {
      std::lock_guard<std::mutex> lock(sent_mutex_);
      sent_.push_back(bytes);
      return false;
    });
    engine_->SetPacketPortForTesting(std::move(port));
    ctx_ = testing::OpenFirstDevice();
    ASSERT_NE(ctx_, nullptr);
    gid_ = LoopbackGid(ctx_);
    ASSERT_GE(gid_, 0);
    pd_ = AllocPd(ctx_);
    cq_ = CreateCq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd_ && cq_);
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_UD;
    qa.cap = {16, 16, 1, 1, 0};
    qp_ = CreateQp(pd_, &qa);
    ASSERT_NE(qp_, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x10000;  // the CM's own: an unprivileged Q_Key
    ASSERT_EQ(ModifyQp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ModifyQp(qp_, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ModifyQp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = uint8_t(gid_);
    ah.grh.hop_limit = 64;
    memcpy(ah.grh.dgid.raw, kOtherHost, 16);
    ah_ = CreateAh(pd_, &ah);
    ASSERT_NE(ah_, nullptr);
    mr_ = RegMr(pd_, mad_.data(), mad_.size(), reinterpret_cast<uintptr_t>(mad_.data()),
                IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    if (mr_) DeregMr(mr_);
    if (ah_) DestroyAh(ah_);
    if (qp_) DestroyQp(qp_);
    if (cq_) DestroyCq(cq_);
    if (pd_) DeallocPd(pd_);
    if (ctx_) CloseDevice(ctx_);
    engine_->SetPacketPortForTesting(nullptr);
  }

  // A REQ (ib-cm.md §3.1) from comm id `comm_id` for port `port` of RDMA_PS_TCP.
  void MakeReq(uint32_t comm_id, uint16_t port) {
    mad_.fill(0);
    mad_[0] = 1;
    mad_[1] = 0x07;
    mad_[2] = 2;
    mad_[3] = 0x03;
    mad_[15] = 0x5a;  // transaction id
    mad_[17] = 0x10;  // REQ
    for (int i = 0; i < 4; ++i) mad_[24 + i] = uint8_t(comm_id >> (24 - 8 * i));
    const uint64_t service_id = (uint64_t(kTcpPs) << 16) | port;
    for (int i = 0; i < 8; ++i) mad_[32 + i] = uint8_t(service_id >> (56 - 8 * i));
  }
  void PostMadToQp1(uint32_t qkey_in_wr) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(mad_.data()), uint32_t(mad_.size()), mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah_;
    wr.wr.ud.remote_qpn = 1;
    wr.wr.ud.remote_qkey = qkey_in_wr;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(PostSend(qp_, &wr, &bad), 0);
  }
  // Polls the CQ (which also reads the port) until `socket` holds a
  // datagram or 5 s passed; returns its length (-1: none).
  ssize_t Await(CmSocket& socket, uint8_t* buf, size_t len, int* completions) {
    const uint64_t end = NowNs() + 5000000000ull;
    while (NowNs() < end) {
      ibv_wc wc[4];
      int got = PollCq(cq_, 4, wc);
      for (int i = 0; i < got; ++i) {
        EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
        ++*completions;
      }
      ssize_t n = socket.Read(buf, len);
      if (n >= 0) return n;
    }
    return -1;
  }

  Engine* engine_ = nullptr;
  FakePacketPort* port_ = nullptr;
  std::mutex sent_mutex_;
  std::vector<std::vector<uint8_t>> sent_;
  ibv_context* ctx_ = nullptr;
  int gid_ = -1;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_ah* ah_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::array<uint8_t, 256> mad_{};
};

TEST_F(RoceGsi, MadLeavesAsUdPacketToQp1AndReachesTheListenersSocket) {
  const uint16_t port = uint16_t(20000 + getpid() % 20000);
  CmSocket listener(CmSocketName(kTcpPs, port));
  ASSERT_TRUE(listener.bound());
  MakeReq(0x12340001, port);
  PostMadToQp1(0x1111);  // whatever the WR says, QP1 takes only the GSI's Q_Key

  uint8_t buf[kGsiEnvelopeSize + 16];
  int completions = 0;
  ASSERT_EQ(Await(listener, buf, sizeof buf, &completions), ssize_t(kGsiEnvelopeSize));
  EXPECT_EQ(completions, 1);

  // On the wire: one UD SEND_ONLY to QP 1, DETH = GSI Q_Key and our QPN.
  {
    std::lock_guard<std::mutex> lock(sent_mutex_);
    ASSERT_EQ(sent_.size(), 1u);
    roce::PacketView view;
    ASSERT_TRUE(roce::ParseTransport(sent_[0], &view).ok());
    EXPECT_EQ(view.headers.bth.opcode, 0x64);
    EXPECT_EQ(view.headers.bth.dest_qp, 1u);
    EXPECT_EQ(view.headers.deth.qkey, kGsiQkeyValue);
    EXPECT_EQ(view.headers.deth.src_qp, qp_->qp_num);
    ASSERT_EQ(view.payload.size(), mad_.size());
    EXPECT_EQ(0, memcmp(view.payload.data(), mad_.data(), mad_.size()));
  }
  // At the listener: the MAD, with the sender's address and QPN.
  GsiEnvelope envelope;
  std::span<const uint8_t> mad;
  ASSERT_TRUE(DecodeGsiEnvelope(std::span<const uint8_t>(buf, kGsiEnvelopeSize), &envelope, &mad));
  ibv_gid ours{};
  ASSERT_EQ(QueryGid(ctx_, 1, gid_, &ours), 0);
  EXPECT_EQ(0, memcmp(envelope.remote_gid.data(), ours.raw, 16));
  EXPECT_EQ(0, memcmp(envelope.local_gid.data(), kOtherHost, 16));
  EXPECT_EQ(envelope.remote_qpn, qp_->qp_num);
  EXPECT_EQ(0, memcmp(mad.data(), mad_.data(), mad_.size()));
}

TEST_F(RoceGsi, RequestNobodyListensForIsAnsweredRejThroughQp1) {
  // The requester's connection socket, which its comm id names.
  const uint16_t socket_number = uint16_t((20000 + getpid() % 20000) | 1);
  CmSocket requester(CmSocketName(kCmProcessPortSpace, socket_number));
  ASSERT_TRUE(requester.bound());
  const uint32_t comm_id = MakeCommId(socket_number, 9);
  MakeReq(comm_id, uint16_t(40000 + getpid() % 20000));  // nobody bound that port
  const uint64_t answered = GsiForwarderCountersNow().answered_no_listener;
  PostMadToQp1(kGsiQkeyValue);

  uint8_t buf[kGsiEnvelopeSize + 16];
  int completions = 0;
  ASSERT_EQ(Await(requester, buf, sizeof buf, &completions), ssize_t(kGsiEnvelopeSize));
  EXPECT_EQ(GsiForwarderCountersNow().answered_no_listener, answered + 1);
  GsiEnvelope envelope;
  std::span<const uint8_t> mad;
  ASSERT_TRUE(DecodeGsiEnvelope(std::span<const uint8_t>(buf, kGsiEnvelopeSize), &envelope, &mad));
  EXPECT_EQ(0, memcmp(envelope.remote_gid.data(), kOtherHost, 16));  // from the host asked
  EXPECT_EQ(envelope.remote_qpn, 1u);                                // from its QP1
  EXPECT_EQ(mad[17], 0x12);                                          // REJ
  EXPECT_EQ(mad[15], 0x5a);                                          // same transaction
  EXPECT_EQ(0, memcmp(mad.data() + 28, mad_.data() + 24, 4));        // to our comm id
  EXPECT_EQ(mad[35], 8);                                             // invalid service ID
  std::lock_guard<std::mutex> lock(sent_mutex_);
  EXPECT_EQ(sent_.size(), 2u);  // the REQ and the REJ, both as packets
}

}  // namespace
}  // namespace softrdma
