// A fixture for the shm wire's two-copy responder (transport/responder.cpp,
// transport/one_sided.cpp) seen from the requester's side: A and B are RC
// QPs of this process, connected to each other; the test holds our inbound
// ring's consumer lock, so it is the requester: it writes A's request
// records into the ring itself, hands each to B as a drain would, and reads
// B's answers from the same ring in the order B produced them.
#pragma once

#include <sched.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "core/qp.h"
#include "core/verbs.h"
#include "engine_device_test.h"
#include "engine_test_support.h"
#include "transport/engine.h"
#include "transport/messages.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "wire/shm/ring.h"

namespace softrdma::testing {

using namespace softrdma::verbs;

constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// What came back for one request: nothing, or one response record.
struct Answer {
  bool any = false;
  wire::RecordHeader h{};
  std::vector<uint8_t> payload;
};

class TwoCopyResponderTest : public EngineDeviceTest {
 protected:
  void SetUp() override {
    EngineDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    memory_.assign(512, 0);
    mr_ = RegMr(pd_, memory_.data(), memory_.size() * 8,
                reinterpret_cast<uintptr_t>(memory_.data()), kRemoteAll);
    ASSERT_NE(mr_, nullptr);
    cq_ = CreateCq(ctx_, 64, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    a_ = MakeRcQp(cq_, cq_);
    b_ = MakeRcQp(cq_, cq_);
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
    EngineDeviceTest::TearDown();
  }

  // RTS towards `dest`, every remote access allowed, two responder
  // resources, timeout 20 (~4 s): nothing is retransmitted behind our back.
  int ToRts(ibv_qp* qp, uint32_t dest) {
    RcConnectParams p;
    p.access = kRemoteAll & ~IBV_ACCESS_LOCAL_WRITE;
    p.max_rd_atomic = 2;
    p.timeout = 20;
    return ConnectRcOverGid(ctx_, gid_, qp, dest, p);
  }

  shm::Ring& Ring() { return const_cast<shm::Ring&>(engine_->inbound_ring()); }
  uint64_t Addr(size_t word) const { return reinterpret_cast<uintptr_t>(&memory_[word]); }

  // The header of A's request to B with `psn`, inline, of `len` bytes.
  wire::RecordHeader RequestHeader(wire::RecordType type, uint32_t psn, uint32_t len) const {
    wire::RecordHeader h{};
    h.type = type;
    h.mode = wire::PayloadMode::kInline;
    h.src_qpn = a_->qp_num;
    h.dst_qpn = b_->qp_num;
    h.psn = psn;
    h.src_slot = engine_->me().slot;
    h.src_gen = engine_->me().gen;
    h.total_len = len;
    return h;
  }
  // Writes A's request with `psn` into the ring (our own: A and B live in
  // this process); a SEND carries `len` zero bytes.
  void WriteRequest(wire::RecordType type, uint32_t psn, uint64_t addr, uint32_t len,
                    uint64_t compare_add = 0, uint64_t swap = 0, bool cmp_swap = false) {
    wire::RecordHeader h = RequestHeader(type, psn, len);
    h.flags = cmp_swap ? wire::kFlagCmpSwap : 0;
    if (type == wire::RecordType::kSend) {
      std::vector<uint8_t> data(len, 0);
      h.payload_len = len;
      EXPECT_TRUE(engine_->Send(*link_, h, data.data(), len));
      return;
    }
    const wire::OneSidedEth eth{addr, mr_->rkey, 0, compare_add, swap};
    EXPECT_TRUE(engine_->Send(*link_, h, &eth, sizeof eth));
  }
  // Hands the record at the ring's head to B as a drain would (an ACK
  // becomes owed where the drain would owe one), then frees it.
  void HandNextToResponder() {
    shm::RecordView view;
    ASSERT_TRUE(Ring().Peek(&view));
    wire::RecordHeader h{};
    view.CopyOut(0, &h, sizeof h);
    {
      std::lock_guard<SpinLock> lock(responder_->lock);
      if (transport::OnRequest(*engine_, *responder_, h, view)) responder_->ack_pending = true;
    }
    Ring().Release(view);
  }
  // The next record in the ring, if any, and frees it.
  Answer TakeAnswer() {
    Answer answer;
    shm::RecordView view;
    if (!Ring().Peek(&view)) return answer;
    answer.any = true;
    view.CopyOut(0, &answer.h, sizeof answer.h);
    answer.payload.resize(answer.h.payload_len);
    view.CopyOut(sizeof answer.h, answer.payload.data(), answer.h.payload_len);
    Ring().Release(view);
    return answer;
  }
  // A's request with `psn` delivered to B as a drain delivers it; returns
  // what B answered into the ring (READ responses here fit one record).
  Answer Deliver(wire::RecordType type, uint32_t psn, uint64_t addr, uint32_t len,
                 uint64_t compare_add = 0, uint64_t swap = 0, bool cmp_swap = false) {
    WriteRequest(type, psn, addr, len, compare_add, swap, cmp_swap);
    HandNextToResponder();
    Answer answer = TakeAnswer();
    EXPECT_FALSE(TakeAnswer().any) << "one request, one answer";
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

  std::vector<uint64_t> memory_;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr;
  std::shared_ptr<PeerLink> link_;
  Qp* responder_ = nullptr;
  bool locked_ = false;
};

}  // namespace softrdma::testing
