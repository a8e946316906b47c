// Duplicate READ and atomic requests on the shm wire's two-copy path
// (transport/one_sided.cpp), answered with the rule the RoCE responder
// applies too (transport/responder_resources.h). A requester sends a request
// twice when its retransmit timer rewinds it (the responder's process was
// descheduled or stopped for longer than the QP's timeout); here the test is
// the requester: with our inbound ring's consumer lock held, it writes the
// request records itself, hands each to the responder QP as a drain would
// and reads the answers the responder put into the same ring.
#include <sched.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "core/qp.h"
#include "core/verbs.h"
#include "engine_test_support.h"
#include "transport/engine.h"
#include "transport/messages.h"
#include "transport/responder_resources.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "wire/shm/ring.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;

constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// What came back for one request: nothing, or one response record.
struct Answer {
  bool any = false;
  wire::RecordHeader h{};
  std::vector<uint8_t> payload;
};

class DuplicateRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::UseOwnNamespace(); }
  static void TearDownTestSuite() { testing::RemoveOwnRegistry(); }

  void SetUp() override {
    int n = 0;
    ibv_device** list = GetDeviceList(&n);
    ASSERT_TRUE(list && n > 0);
    ctx_ = OpenDevice(list[0]);
    FreeDeviceList(list);
    ASSERT_NE(ctx_, nullptr);
    gid_ = testing::LoopbackGid(ctx_);
    ASSERT_GE(gid_, 0);
    engine_ = Engine::Get(nullptr);
    ASSERT_NE(engine_, nullptr);
    pd_ = AllocPd(ctx_);
    ASSERT_NE(pd_, nullptr);
    memory_.assign(512, 0);
    mr_ = RegMr(pd_, memory_.data(), memory_.size() * 8,
                reinterpret_cast<uintptr_t>(memory_.data()), kRemoteAll);
    ASSERT_NE(mr_, nullptr);
    cq_ = CreateCq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    a_ = MakeQp();
    b_ = MakeQp();
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(ToRts(a_, b_->qp_num), 0);
    ASSERT_EQ(ToRts(b_, a_->qp_num), 0);
    link_ = engine_->ResolveQpn(b_->qp_num);
    ASSERT_NE(link_, nullptr);
    responder_ = engine_->LocalQp(b_->qp_num);
    ASSERT_NE(responder_, nullptr);
    const uint64_t give_up = NowNs() + 5'000'000'000ull;
    while (!Ring().TryLockConsumer()) {
      ASSERT_LT(NowNs(), give_up) << "the ring's consumer lock stays taken";
      sched_yield();
    }
    locked_ = true;
  }
  void TearDown() override {
    if (locked_) Ring().UnlockConsumer();
    link_.reset();
    for (ibv_qp* qp : {a_, b_})
      if (qp) DestroyQp(qp);
    if (cq_) DestroyCq(cq_);
    if (mr_) DeregMr(mr_);
    if (pd_) DeallocPd(pd_);
    if (ctx_) CloseDevice(ctx_);
  }

  ibv_qp* MakeQp() {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    return CreateQp(pd_, &a);
  }
  // RTS towards `dest`, every remote access allowed, two responder
  // resources, timeout 20 (~4 s): nothing is retransmitted behind our back.
  int ToRts(ibv_qp* qp, uint32_t dest) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = kRemoteAll & ~IBV_ACCESS_LOCAL_WRITE;
    if (int rc =
            ModifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return rc;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 2;
    a.min_rnr_timer = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_);
    QueryGid(ctx_, 1, gid_, &a.ah_attr.grh.dgid);
    if (int rc = ModifyQp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return rc;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 20;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 2;
    return ModifyQp(qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }

  shm::Ring& Ring() { return const_cast<shm::Ring&>(engine_->inbound_ring()); }
  uint64_t Addr(size_t word) const { return reinterpret_cast<uintptr_t>(&memory_[word]); }

  // A's request with `psn` delivered to B as a drain delivers it; returns
  // what B answered into the ring (READ responses here fit one record).
  Answer Deliver(wire::RecordType type, uint32_t psn, uint64_t addr, uint32_t len,
                 uint64_t compare_add = 0, uint64_t swap = 0, bool cmp_swap = false) {
    wire::RecordHeader h{};
    h.type = type;
    h.mode = wire::PayloadMode::kInline;
    h.flags = cmp_swap ? wire::kFlagCmpSwap : 0;
    h.src_qpn = a_->qp_num;
    h.dst_qpn = b_->qp_num;
    h.psn = psn;
    h.src_slot = engine_->me().slot;
    h.src_gen = engine_->me().gen;
    h.total_len = len;
    const wire::OneSidedEth eth{addr, mr_->rkey, 0, compare_add, swap};
    EXPECT_TRUE(engine_->Send(*link_, h, &eth, sizeof eth));
    shm::RecordView view;
    EXPECT_TRUE(Ring().Peek(&view));
    {
      std::lock_guard<SpinLock> lock(responder_->lock);
      transport::OnRequest(*engine_, *responder_, h, view);
    }
    Ring().Release(view);
    Answer answer;
    if (!Ring().Peek(&view)) return answer;
    answer.any = true;
    view.CopyOut(0, &answer.h, sizeof answer.h);
    answer.payload.resize(answer.h.payload_len);
    view.CopyOut(sizeof answer.h, answer.payload.data(), answer.h.payload_len);
    Ring().Release(view);
    EXPECT_FALSE(Ring().Peek(&view)) << "one request, one answer";
    return answer;
  }
  static uint64_t Value(const Answer& a) {
    uint64_t v = 0;
    if (a.payload.size() == 8) memcpy(&v, a.payload.data(), 8);
    return v;
  }
  void ExpectAtomicAnswer(const Answer& a, uint32_t psn, uint64_t original) {
    ASSERT_TRUE(a.any) << "no answer to the atomic with PSN " << psn;
    EXPECT_EQ(a.h.type, wire::RecordType::kAtomicResponse);
    EXPECT_EQ(a.h.psn, psn);
    EXPECT_EQ(a.h.dst_qpn, a_->qp_num);
    EXPECT_EQ(Value(a), original);
  }
  uint32_t ExpectedPsn() {
    std::lock_guard<SpinLock> lock(responder_->lock);
    return responder_->epsn;
  }

  ibv_context* ctx_ = nullptr;
  int gid_ = -1;
  Engine* engine_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint64_t> memory_;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr;
  std::shared_ptr<PeerLink> link_;
  Qp* responder_ = nullptr;
  bool locked_ = false;
};

// A duplicate atomic gets the saved result again and does not execute: a
// second fetch-add would add twice, a second compare-and-swap would now
// compare against the swapped value and answer that instead.
TEST_F(DuplicateRequestTest, AtomicIsAnsweredFromItsSavedResultAndExecutesOnce) {
  memory_[0] = 100;
  const auto kFetchAdd = wire::RecordType::kAtomic;
  ExpectAtomicAnswer(Deliver(kFetchAdd, 0, Addr(0), 8, 5), 0, 100);
  EXPECT_EQ(memory_[0], 105u);
  ExpectAtomicAnswer(Deliver(kFetchAdd, 0, Addr(0), 8, 5), 0, 100);
  EXPECT_EQ(memory_[0], 105u) << "the duplicate fetch-add executed again";

  ExpectAtomicAnswer(Deliver(kFetchAdd, 1, Addr(0), 8, 105, 7, /*cmp_swap=*/true), 1, 105);
  EXPECT_EQ(memory_[0], 7u);
  ExpectAtomicAnswer(Deliver(kFetchAdd, 1, Addr(0), 8, 105, 7, true), 1, 105);
  EXPECT_EQ(memory_[0], 7u);
  EXPECT_EQ(ExpectedPsn(), 2u) << "duplicates do not move the expected PSN";
}

// A duplicate READ is executed again from the MR: it returns what the
// memory holds now, not a copy kept from the first time.
TEST_F(DuplicateRequestTest, ReadIsReadAgainFromTheMr) {
  memory_[8] = 0x1111111111111111ull;
  memory_[9] = 0x2222222222222222ull;
  Answer first = Deliver(wire::RecordType::kRead, 0, Addr(8), 16);
  ASSERT_TRUE(first.any);
  EXPECT_EQ(first.h.type, wire::RecordType::kReadResponse);
  EXPECT_EQ(first.h.psn, 0u);
  ASSERT_EQ(first.payload.size(), 16u);
  EXPECT_EQ(memcmp(first.payload.data(), &memory_[8], 16), 0);

  memory_[9] = 0x3333333333333333ull;  // changed since
  Answer again = Deliver(wire::RecordType::kRead, 0, Addr(8), 16);
  ASSERT_TRUE(again.any) << "the duplicate READ was not answered";
  EXPECT_EQ(again.h.type, wire::RecordType::kReadResponse);
  EXPECT_EQ(again.h.psn, 0u);
  EXPECT_TRUE(again.h.flags & wire::kFlagLastFragment);
  ASSERT_EQ(again.payload.size(), 16u);
  EXPECT_EQ(memcmp(again.payload.data(), &memory_[8], 16), 0);

  // A part of it (what a requester that lost the tail asks for) too.
  Answer part = Deliver(wire::RecordType::kRead, 0, Addr(9), 8);
  ASSERT_TRUE(part.any);
  ASSERT_EQ(part.payload.size(), 8u);
  EXPECT_EQ(memcmp(part.payload.data(), &memory_[9], 8), 0);
  EXPECT_EQ(ExpectedPsn(), 1u);
}

// What the responder cannot have executed is not answered: a "duplicate"
// READ for more than the original, and one of a forgotten atomic (beyond
// max_dest_rd_atomic = 2 executions ago), as on the RoCE wire.
TEST_F(DuplicateRequestTest, WhatIsNotRememberedIsDropped) {
  memory_[16] = 1;
  ASSERT_TRUE(Deliver(wire::RecordType::kRead, 0, Addr(16), 8).any);
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(16), 16).any);
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(17), 8).any);
  for (uint32_t psn = 1; psn <= 3; ++psn)
    ASSERT_TRUE(Deliver(wire::RecordType::kAtomic, psn, Addr(16), 8, 1).any);
  EXPECT_EQ(memory_[16], 4u);
  EXPECT_FALSE(Deliver(wire::RecordType::kAtomic, 1, Addr(16), 8, 1).any) << "forgotten";
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(16), 8).any) << "forgotten";
  ExpectAtomicAnswer(Deliver(wire::RecordType::kAtomic, 3, Addr(16), 8, 1), 3, 3);
  EXPECT_EQ(memory_[16], 4u);
}

// The rule itself, as both wires use it.
TEST(ResponderResources, RemembersMaxDestRdAtomicRequestsOldestFirst) {
  transport::ResponderResources r;
  r.Reset(2);
  r.RecordRead(10, 13, 0x1000, 7, 4096, 1);  // a READ of 4 response packets
  r.RecordAtomic(14, 0x2000, 7, 42, 1);
  EXPECT_NE(r.ReadToReplay(12, 7, 0x1800, 1024), nullptr) << "a part, from a later packet";
  EXPECT_EQ(r.ReadToReplay(12, 8, 0x1800, 1024), nullptr) << "another rkey";
  EXPECT_EQ(r.ReadToReplay(12, 7, 0x1800, 4096), nullptr) << "beyond the original";
  EXPECT_EQ(r.ReadToReplay(14, 7, 0x1000, 8), nullptr) << "the atomic's PSN";
  ASSERT_NE(r.AtomicToReplay(14), nullptr);
  EXPECT_EQ(r.AtomicToReplay(14)->original, 42u);
  EXPECT_EQ(r.AtomicToReplay(13), nullptr);
  r.RecordAtomic(15, 0x2000, 7, 43, 1);  // recycles the READ's entry
  EXPECT_EQ(r.ReadToReplay(10, 7, 0x1000, 8), nullptr);
  EXPECT_NE(r.AtomicToReplay(14), nullptr);
  r.RecordRead(0xfffffe, 0x000001, 0x1000, 7, 4096, 1);  // across the PSN wrap
  EXPECT_NE(r.ReadToReplay(0, 7, 0x1000, 8), nullptr);
  EXPECT_EQ(r.AtomicToReplay(14), nullptr);
  r.Reset(0);  // at least one entry, none valid
  EXPECT_EQ(r.AtomicToReplay(15), nullptr);
}

}  // namespace
}  // namespace softrdma
