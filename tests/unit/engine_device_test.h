// The fixture base of the unit tests that drive this process's engine
// through the device: a shm namespace of their own (removed at the end),
// the device, its loopback GID, the engine and a PD. A derived fixture
// calls this SetUp first (and stops on its fatal failure) and this
// TearDown last, after destroying what it made on the PD.
#pragma once

#include <gtest/gtest.h>

#include "core/verbs.h"
#include "engine_test_support.h"
#include "transport/engine.h"

namespace softrdma::testing {

class EngineDeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { UseOwnNamespace(); }
  static void TearDownTestSuite() { RemoveOwnRegistry(); }

  void SetUp() override {
    ctx_ = OpenFirstDevice();
    ASSERT_NE(ctx_, nullptr);
    gid_ = LoopbackGid(ctx_);
    ASSERT_GE(gid_, 0);
    engine_ = Engine::Get(nullptr);
    ASSERT_NE(engine_, nullptr);
    pd_ = verbs::AllocPd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }
  void TearDown() override {
    if (pd_) verbs::DeallocPd(pd_);
    if (ctx_) verbs::CloseDevice(ctx_);
  }

  // An RC QP with `max_wr` WRs of one SGE each way.
  ibv_qp* MakeRcQp(ibv_cq* send_cq, ibv_cq* recv_cq, uint32_t max_wr = 16) {
    ibv_qp_init_attr a{};
    a.send_cq = send_cq;
    a.recv_cq = recv_cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = max_wr;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    return verbs::CreateQp(pd_, &a);
  }

  ibv_context* ctx_ = nullptr;
  int gid_ = -1;
  Engine* engine_ = nullptr;
  ibv_pd* pd_ = nullptr;
};

}  // namespace softrdma::testing
