// The fixture of the RoCE transport's unit tests: two QPs of this process
// connected over an in-process packet port with faults (fake_packet_port.h),
// so every packet goes through the codec, the ICRC and the requester /
// responder / completer; the shm wire is not used
// (Engine::SetPacketPortForTesting).
#pragma once

#include <endian.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/verbs.h"
#include "engine_test_support.h"
#include "fake_packet_port.h"
#include "host/registry.h"
#include "transport/engine.h"
#include "transport/roce/roce_qp.h"
#include "util/clock.h"
#include "wire/roce/packet.h"
#include "wire/shm/shm_region.h"

namespace softrdma::testing {

using namespace softrdma::verbs;

// BTH opcode of an RC ACKNOWLEDGE (ACKs and NAKs), as tests spot it in the
// packets the fake port carries.
inline constexpr uint8_t kAckOpcode = 0x11;

// The 24-bit PSN of a packet the fake port carries (BTH bytes 9..11).
inline uint32_t PsnOf(const std::vector<uint8_t>& packet) {
  return (uint32_t{packet[9]} << 16) | (uint32_t{packet[10]} << 8) | packet[11];
}

struct QpOptions {
  ibv_qp_type type = IBV_QPT_RC;
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t timeout = 12;  // ~17 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t rd_atomic = 4;
};

class RoceTransport : public ::testing::Test {
 protected:
  // A namespace of this test process's own, removed at the end: the engine
  // must neither attach to the user's default registry nor leave one behind.
  static void SetUpTestSuite() { UseOwnNamespace(); }
  static void TearDownTestSuite() { RemoveOwnRegistry(); }
  virtual bool WithFd() const { return false; }
  void SetUp() override {
    Status err;
    engine_ = Engine::Get(&err);
    ASSERT_NE(engine_, nullptr);
    auto port = std::make_unique<FakePacketPort>(PortFaults{}, WithFd());
    port_ = port.get();
    engine_->SetPacketPortForTesting(std::move(port));
    ctx_ = OpenFirstDevice();
    ASSERT_NE(ctx_, nullptr);
    gid_ = LoopbackGid(ctx_);
    ASSERT_GE(gid_, 0);
    pd_ = AllocPd(ctx_);
    cq_a_ = CreateCq(ctx_, 4096, nullptr, nullptr, 0);
    cq_b_ = CreateCq(ctx_, 4096, nullptr, nullptr, 0);
    ASSERT_TRUE(pd_ && cq_a_ && cq_b_);
  }
  void TearDown() override {
    for (ibv_qp* qp : {a_, b_})
      if (qp) DestroyQp(qp);
    for (ibv_mr* mr : mrs_) DeregMr(mr);
    if (cq_a_) DestroyCq(cq_a_);
    if (cq_b_) DestroyCq(cq_b_);
    if (pd_) DeallocPd(pd_);
    if (ctx_) CloseDevice(ctx_);
    engine_->SetPacketPortForTesting(nullptr);
  }

  ibv_qp* MakeQp(ibv_cq* cq, const QpOptions& o) {
    ibv_qp_init_attr qa{};
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.qp_type = o.type;
    qa.cap = {1024, 1024, 4, 4, 64};
    return CreateQp(pd_, &qa);
  }
  // PSNs start at 0xFFFFF0: they wrap during the tests.
  int Connect(ibv_qp* qp, uint32_t dest, const QpOptions& o) {
    RcConnectParams p;
    p.type = o.type;
    p.mtu = o.mtu;
    p.psn = 0xFFFFF0;
    p.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
               (o.type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    p.max_rd_atomic = o.rd_atomic;
    p.min_rnr_timer = o.min_rnr_timer;
    p.timeout = o.timeout;
    p.retry_cnt = o.retry_cnt;
    p.rnr_retry = o.rnr_retry;
    return ConnectRcOverGid(ctx_, gid_, qp, dest, p);
  }
  void MakePair(const QpOptions& o = {}) {
    a_ = MakeQp(cq_a_, o);
    b_ = MakeQp(cq_b_, o);
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(Connect(a_, b_->qp_num, o), 0);
    ASSERT_EQ(Connect(b_, a_->qp_num, o), 0);
    ASSERT_NE(Qp::From(a_)->roce, nullptr) << "the QP must be on the RoCE wire";
  }
  ibv_mr* Register(std::vector<uint8_t>& buf) {
    ibv_mr* mr = RegMr(pd_, buf.data(), buf.size(), reinterpret_cast<uintptr_t>(buf.data()),
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC);
    mrs_.push_back(mr);
    return mr;
  }
  // Polls `cq` until `n` completions arrived or `ms` passed.
  std::vector<ibv_wc> Wait(ibv_cq* cq, size_t n, int ms = 10000) {
    std::vector<ibv_wc> out;
    const uint64_t end = NowNs() + uint64_t(ms) * 1000000;
    while (out.size() < n && NowNs() < end) {
      ibv_wc wc[16];
      const int got = PollCq(cq, 16, wc);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
      if (got == 0) std::this_thread::yield();
    }
    return out;
  }
  // A UD QP (sends complete on cq_a_, receives on cq_b_) with Q_Key 0x1234,
  // taken to RTR; `*qp` stays null when a step fails (the test then stops).
  void CreateUdQpAtRtr(uint32_t depth, ibv_qp** qp) {
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_a_;
    qa.recv_cq = cq_b_;
    qa.qp_type = IBV_QPT_UD;
    qa.cap = {depth, depth, 1, 1, 64};
    ibv_qp* q = CreateQp(pd_, &qa);
    ASSERT_NE(q, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x1234;
    ASSERT_EQ(ModifyQp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ModifyQp(q, &a, IBV_QP_STATE), 0);
    *qp = q;
  }
  void PostRecv(ibv_qp* qp, ibv_mr* mr, void* addr, uint32_t len, uint64_t id) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(verbs::PostRecv(qp, &wr, &bad), 0);
  }
  int Post(ibv_qp* qp, ibv_wr_opcode op, ibv_mr* mr, void* addr, uint32_t len, uint64_t id,
           uint64_t remote = 0, uint32_t rkey = 0, uint64_t compare_add = 0, uint64_t swap = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
      wr.imm_data = htobe32(static_cast<uint32_t>(id));
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic = {remote, compare_add, swap, rkey};
    } else {
      wr.wr.rdma = {remote, rkey};
    }
    ibv_send_wr* bad = nullptr;
    return PostSend(qp, &wr, &bad);
  }

  // The address and network headers of a packet a scripted peer injects into
  // the fake port: from this device's loopback GID to itself, RoCE's UDP port.
  void LoopbackInjectionHeaders(in6_addr* addr, roce::NetworkHeaders* net) {
    ibv_gid g{};
    QueryGid(ctx_, 1, gid_, &g);
    memcpy(addr->s6_addr, g.raw, 16);
    memcpy(net->src_gid.data(), g.raw, 16);
    memcpy(net->dst_gid.data(), g.raw, 16);
    net->ip_version = roce::IsIpv4Mapped(net->src_gid) ? 4 : 6;
    net->udp_src_port = roce::kRoceUdpPort;
  }

  Engine* engine_ = nullptr;
  FakePacketPort* port_ = nullptr;
  ibv_context* ctx_ = nullptr;
  int gid_ = -1;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_a_ = nullptr;
  ibv_cq* cq_b_ = nullptr;
  ibv_qp* a_ = nullptr;
  ibv_qp* b_ = nullptr;
  std::vector<ibv_mr*> mrs_;
};

inline void Fill(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7) >> 1);
}

}  // namespace softrdma::testing
