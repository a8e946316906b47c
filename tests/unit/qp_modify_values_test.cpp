// Value checks of ibv_modify_qp (§4): each range at its boundary, the RoCE
// address-vector rule, Q_Key privilege, and the exact call sequences of real
// programs (rdma-core's pingpong examples), which must keep working.
#include <gtest/gtest.h>

#include <cerrno>
#include <ostream>
#include <string>

#include "core/qp_state_machine.h"
#include "qp_test_attrs.h"

namespace softrdma {
namespace {

using test::GoodAttr;
using test::TestContext;

constexpr uint32_t kRcInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kUdInit = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
constexpr uint32_t kRcRtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kRcRts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

int Modify(ibv_qp_type type, ibv_qp_state cur, const ibv_qp_attr& attr, uint32_t mask,
           const ModifyContext& ctx = TestContext(), ibv_qp_state* next_out = nullptr) {
  return CheckModifyQp(type, cur, attr, static_cast<int>(mask), ctx, next_out);
}

// ---------------------------------------------------------------- ranges

struct RangeCase {
  const char* name;
  ibv_qp_type type;
  ibv_qp_state cur;
  ibv_qp_state next;
  uint32_t mask;
  void (*set)(ibv_qp_attr&, unsigned);
  unsigned good;  // the boundary value that still passes
  unsigned bad;   // the first value past it
  int bad_errno;
};

const RangeCase kRangeCases[] = {
    {"timeout", IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts,
     [](ibv_qp_attr& a, unsigned v) { a.timeout = v; }, 31, 32, EINVAL},
    {"retry_cnt", IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts,
     [](ibv_qp_attr& a, unsigned v) { a.retry_cnt = v; }, 7, 8, EINVAL},
    {"rnr_retry", IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts,
     [](ibv_qp_attr& a, unsigned v) { a.rnr_retry = v; }, 7, 8, EINVAL},
    {"max_rd_atomic", IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts,
     [](ibv_qp_attr& a, unsigned v) { a.max_rd_atomic = v; }, limits::kMaxQpInitRdAtom,
     limits::kMaxQpInitRdAtom + 1, EINVAL},
    {"path_mig_state", IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts | IBV_QP_PATH_MIG_STATE,
     [](ibv_qp_attr& a, unsigned v) { a.path_mig_state = static_cast<ibv_mig_state>(v); },
     IBV_MIG_ARMED, IBV_MIG_ARMED + 1, EINVAL},
    {"min_rnr_timer", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.min_rnr_timer = v; }, 31, 32, EINVAL},
    {"max_dest_rd_atomic", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.max_dest_rd_atomic = v; }, limits::kMaxQpRdAtom,
     limits::kMaxQpRdAtom + 1, EINVAL},
    {"path_mtu_max", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.path_mtu = static_cast<ibv_mtu>(v); }, IBV_MTU_4096,
     IBV_MTU_4096 + 1, EINVAL},
    {"path_mtu_min", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.path_mtu = static_cast<ibv_mtu>(v); }, IBV_MTU_256, 0,
     EINVAL},
    {"sgid_index", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.ah_attr.grh.sgid_index = v; }, 1, 2, EINVAL},
    {"is_global", IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr,
     [](ibv_qp_attr& a, unsigned v) { a.ah_attr.is_global = v; }, 1, 0, EINVAL},
    {"ah_port_num", IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_AV,
     [](ibv_qp_attr& a, unsigned v) { a.ah_attr.port_num = v; }, 1, 2, EINVAL},
    {"port_num_high", IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit,
     [](ibv_qp_attr& a, unsigned v) { a.port_num = v; }, 1, 2, EINVAL},
    {"port_num_zero", IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit,
     [](ibv_qp_attr& a, unsigned v) { a.port_num = v; }, 1, 0, EINVAL},
    {"pkey_index", IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit,
     [](ibv_qp_attr& a, unsigned v) { a.pkey_index = v; }, limits::kPkeyTableLen - 1,
     limits::kPkeyTableLen, EINVAL},
    {"qp_access_flags", IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit,
     [](ibv_qp_attr& a, unsigned v) { a.qp_access_flags = v; }, limits::kSupportedQpAccess,
     1u << 10, EINVAL},
    {"ud_qkey", IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, kUdInit,
     [](ibv_qp_attr& a, unsigned v) { a.qkey = v; }, 0x7fffffff, 0x80000000, EPERM},
    {"ud_qkey_in_rts", IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_QKEY,
     [](ibv_qp_attr& a, unsigned v) { a.qkey = v; }, 0x7fffffff, 0xffffffff, EPERM},
};

void PrintTo(const RangeCase& c, std::ostream* os) {
  *os << c.name;
}

class RangeTest : public testing::TestWithParam<RangeCase> {};

TEST_P(RangeTest, BoundaryPassesAndNextValueFails) {
  const RangeCase& c = GetParam();
  ibv_qp_attr a = GoodAttr(c.cur, c.next);
  c.set(a, c.good);
  ibv_qp_state next = IBV_QPS_UNKNOWN;
  EXPECT_EQ(Modify(c.type, c.cur, a, c.mask, TestContext(), &next), 0);
  EXPECT_EQ(next, c.next);

  c.set(a, c.bad);
  next = IBV_QPS_UNKNOWN;
  EXPECT_EQ(Modify(c.type, c.cur, a, c.mask, TestContext(), &next), c.bad_errno);
  EXPECT_EQ(next, IBV_QPS_UNKNOWN) << "next_out written on failure";
}

INSTANTIATE_TEST_SUITE_P(Values, RangeTest, testing::ValuesIn(kRangeCases),
                         [](const testing::TestParamInfo<RangeCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(Values, PathMtuAbovePortMaxFails) {
  ModifyContext ctx = TestContext();
  ctx.port_max_mtu = IBV_MTU_1024;
  ibv_qp_attr a = GoodAttr(IBV_QPS_INIT, IBV_QPS_RTR);
  a.path_mtu = IBV_MTU_1024;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_INIT, a, kRcRtr, ctx), 0);
  a.path_mtu = IBV_MTU_2048;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_INIT, a, kRcRtr, ctx), EINVAL);
}

// Values of attributes absent from the mask are never looked at.
TEST(Values, UnmaskedFieldsAreIgnored) {
  ibv_qp_attr a = GoodAttr(IBV_QPS_RESET, IBV_QPS_INIT);
  a.timeout = 200;
  a.path_mtu = static_cast<ibv_mtu>(0);
  a.ah_attr.is_global = 0;
  a.qkey = 0x80000000;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RESET, a, kRcInit), 0);
}

TEST(Values, EveryDefinedAccessFlagIsAcceptedButOnlyRemoteOnesTakeEffect) {
  ibv_qp_attr a = GoodAttr(IBV_QPS_RESET, IBV_QPS_INIT);
  for (unsigned bit = 0; bit < 10; ++bit) {
    a.qp_access_flags = 1u << bit;
    EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RESET, a, kRcInit), 0) << "bit " << bit;
  }
  a.qp_access_flags = IBV_ACCESS_RELAXED_ORDERING;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RESET, a, kRcInit), 0);
  a.qp_access_flags = 1u << 31;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RESET, a, kRcInit), EINVAL);

  EXPECT_EQ(EffectiveQpAccess(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(EffectiveQpAccess(~0u), limits::kSupportedQpAccess);
}

TEST(Values, PrivilegedCallerMaySetControlledQkey) {
  ModifyContext ctx = TestContext();
  ctx.privileged = true;
  ibv_qp_attr a = GoodAttr(IBV_QPS_RESET, IBV_QPS_INIT);
  a.qkey = 0x80010000;
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_RESET, a, kUdInit, ctx), 0);
  ctx.privileged = false;
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_RESET, a, kUdInit, ctx), EPERM);
}

// ---------------------------------------------------------------- RoCE AV

TEST(RoceAddressVector, LidOnlyAvIsRefused) {
  ibv_ah_attr ah = GoodAttr(IBV_QPS_INIT, IBV_QPS_RTR).ah_attr;
  EXPECT_EQ(CheckRoceAddressVector(ah, TestContext()), 0);
  ah.is_global = 0;
  ah.dlid = 7;
  EXPECT_EQ(CheckRoceAddressVector(ah, TestContext()), EINVAL);
}

TEST(RoceAddressVector, SgidIndexMustNameAPopulatedEntry) {
  ibv_ah_attr ah = GoodAttr(IBV_QPS_INIT, IBV_QPS_RTR).ah_attr;
  ModifyContext ctx = TestContext();
  ctx.valid_gid_mask = 1u << 3;
  for (uint8_t i = 0; i < limits::kGidTableLen; ++i) {
    ah.grh.sgid_index = i;
    EXPECT_EQ(CheckRoceAddressVector(ah, ctx), i == 3 ? 0 : EINVAL) << "index " << int{i};
  }
  ctx.valid_gid_mask = ~uint64_t{0};  // even a bogus mask cannot open entries past the table
  ah.grh.sgid_index = limits::kGidTableLen - 1;
  EXPECT_EQ(CheckRoceAddressVector(ah, ctx), 0);
  ah.grh.sgid_index = limits::kGidTableLen;
  EXPECT_EQ(CheckRoceAddressVector(ah, ctx), EINVAL);
  ah.grh.sgid_index = 255;
  EXPECT_EQ(CheckRoceAddressVector(ah, ctx), EINVAL);
}

TEST(RoceAddressVector, EmptyGidTableRefusesEveryAv) {
  ModifyContext ctx = TestContext();
  ctx.valid_gid_mask = 0;
  const ibv_qp_attr a = GoodAttr(IBV_QPS_INIT, IBV_QPS_RTR);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_INIT, a, kRcRtr, ctx), EINVAL);
}

// ---------------------------------------------------------------- real programs

// ibv_rc_pingpong: INIT, RTR, RTS with its exact masks and values.
TEST(Programs, RcPingpongWithGidReachesRts) {
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = 0;
  ASSERT_EQ(Modify(IBV_QPT_RC, state, a, kRcInit, TestContext(), &state), 0);

  ibv_qp_attr rtr = GoodAttr(IBV_QPS_INIT, IBV_QPS_RTR);
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.grh.hop_limit = 1;
  ASSERT_EQ(Modify(IBV_QPT_RC, state, rtr, kRcRtr, TestContext(), &state), 0);

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 14;
  rts.retry_cnt = 7;
  rts.rnr_retry = 7;
  rts.sq_psn = 0x1234;
  rts.max_rd_atomic = 1;
  ASSERT_EQ(Modify(IBV_QPT_RC, state, rts, kRcRts, TestContext(), &state), 0);
  EXPECT_EQ(state, IBV_QPS_RTS);
}

// The classic RoCE pitfall: without -g the peer's GID is zero, rc_pingpong
// builds a LID-only AV, and the move to RTR fails.
TEST(Programs, RcPingpongWithoutGidFailsAtRtr) {
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = IBV_MTU_1024;
  rtr.dest_qp_num = 0x11;
  rtr.rq_psn = 0x22;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.is_global = 0;
  rtr.ah_attr.dlid = 0;
  rtr.ah_attr.port_num = 1;
  ibv_qp_state state = IBV_QPS_INIT;
  EXPECT_EQ(Modify(IBV_QPT_RC, state, rtr, kRcRtr, TestContext(), &state), EINVAL);
  EXPECT_EQ(state, IBV_QPS_INIT);
}

// ibv_ud_pingpong: RTR takes only IBV_QP_STATE, RTS only SQ_PSN.
TEST(Programs, UdPingpongReachesRts) {
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = 0x11111111;
  ASSERT_EQ(Modify(IBV_QPT_UD, state, a, kUdInit, TestContext(), &state), 0);
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(Modify(IBV_QPT_UD, state, a, IBV_QP_STATE, TestContext(), &state), 0);
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(Modify(IBV_QPT_UD, state, a, IBV_QP_STATE | IBV_QP_SQ_PSN, TestContext(), &state), 0);
  EXPECT_EQ(state, IBV_QPS_RTS);
}

// ibv_xsrq_pingpong and pyverbs' XRC resources: the receive QP takes
// TIMEOUT|SQ_PSN to RTS, the send QP no responder attributes at RTR.
TEST(Programs, XsrqPingpongReachesRts) {
  const uint32_t send_rtr =
      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  const uint32_t recv_rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
  for (ibv_qp_type type : {IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND}) {
    const bool recv = type == IBV_QPT_XRC_RECV;
    ibv_qp_state state = IBV_QPS_RESET;
    ibv_qp_attr init = GoodAttr(state, IBV_QPS_INIT);
    init.qp_access_flags = recv ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC
                                : 0;
    ASSERT_EQ(Modify(type, state, init, kRcInit, TestContext(), &state), 0) << recv;
    ASSERT_EQ(Modify(type, state, GoodAttr(state, IBV_QPS_RTR), recv ? kRcRtr : send_rtr,
                     TestContext(), &state),
              0)
        << recv;
    ASSERT_EQ(Modify(type, state, GoodAttr(state, IBV_QPS_RTS), recv ? recv_rts : kRcRts,
                     TestContext(), &state),
              0)
        << recv;
    EXPECT_EQ(state, IBV_QPS_RTS);
  }
}

}  // namespace
}  // namespace softrdma
