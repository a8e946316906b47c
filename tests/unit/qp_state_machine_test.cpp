// The transition table, the attribute-mask table and the post-time rules,
// each checked against an expected table written out here from
// docs/qp-state-machine.md (not derived from the implementation's tables).
#include "core/qp_state_machine.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "qp_test_attrs.h"

namespace softrdma {
namespace {

using test::GoodAttr;
using test::TestContext;

constexpr ibv_qp_state kStates[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                    IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};

// §2, row = from, column = to.
constexpr bool kExpectedLegal[7][7] = {
    //           RESET  INIT   RTR    RTS    SQD    SQE    ERR
    /* RESET */ {true, true, false, false, false, false, false},
    /* INIT  */ {true, true, true, false, false, false, true},
    /* RTR   */ {true, false, false, true, false, false, true},
    /* RTS   */ {true, false, false, true, true, false, true},
    /* SQD   */ {true, false, false, true, true, false, true},
    /* SQE   */ {true, false, false, true, false, false, true},
    /* ERR   */ {true, false, false, false, false, false, true},
};

constexpr ibv_qp_type kTypes[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND,
                                  IBV_QPT_XRC_RECV};

std::string TypeName(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC:
      return "RC";
    case IBV_QPT_UC:
      return "UC";
    case IBV_QPT_UD:
      return "UD";
    case IBV_QPT_XRC_SEND:
      return "XRCSEND";
    case IBV_QPT_XRC_RECV:
      return "XRCRECV";
    default: {
      // Not "T" + to_string(t): GCC 12 at -O3 warns (-Werror=restrict) on it.
      std::string name = "T";
      name += std::to_string(t);
      return name;
    }
  }
}

int Modify(ibv_qp_type type, ibv_qp_state cur, const ibv_qp_attr& attr, uint32_t mask,
           ibv_qp_state* next_out = nullptr) {
  return CheckModifyQp(type, cur, attr, static_cast<int>(mask), TestContext(), next_out);
}

// ---------------------------------------------------------------- §2 table

class TransitionTest : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TransitionTest, MatchesExpectedMatrix) {
  const auto [c, n] = GetParam();
  const ibv_qp_state cur = kStates[c];
  const ibv_qp_state next = kStates[n];
  EXPECT_EQ(IsLegalTransition(cur, next), kExpectedLegal[c][n]);
  if (!kExpectedLegal[c][n]) {
    // No attribute set can make an illegal transition pass, for any type.
    for (ibv_qp_type type : kTypes) {
      EXPECT_EQ(Modify(type, cur, GoodAttr(cur, next), IBV_QP_STATE), EINVAL) << TypeName(type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, TransitionTest,
                         testing::Combine(testing::Range(0, 7), testing::Range(0, 7)),
                         [](const testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return std::string(QpStateName(kStates[std::get<0>(info.param)])) +
                                  "_to_" + QpStateName(kStates[std::get<1>(info.param)]);
                         });

TEST(Transition, UnknownStateIsNeverLegal) {
  for (ibv_qp_state s : kStates) {
    EXPECT_FALSE(IsLegalTransition(IBV_QPS_UNKNOWN, s));
    EXPECT_FALSE(IsLegalTransition(s, IBV_QPS_UNKNOWN));
  }
}

// Without IBV_QP_STATE the QP stays put, and staying put must be legal
// (mlx5-strict): RTR and SQE attributes cannot be changed in place.
TEST(Transition, AttributeOnlyModifyIsCurToCur) {
  ibv_qp_state next = IBV_QPS_ERR;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTR, GoodAttr(IBV_QPS_RTR, IBV_QPS_RTR), 0), EINVAL);
  EXPECT_EQ(
      Modify(IBV_QPT_RC, IBV_QPS_RTR, GoodAttr(IBV_QPS_RTR, IBV_QPS_RTR), IBV_QP_MIN_RNR_TIMER),
      EINVAL);
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_SQE, GoodAttr(IBV_QPS_SQE, IBV_QPS_SQE), IBV_QP_QKEY),
            EINVAL);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTS, GoodAttr(IBV_QPS_RTS, IBV_QPS_RTS),
                   IBV_QP_MIN_RNR_TIMER, &next),
            0);
  EXPECT_EQ(next, IBV_QPS_RTS);
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_INIT, GoodAttr(IBV_QPS_INIT, IBV_QPS_INIT), 0, &next), 0);
  EXPECT_EQ(next, IBV_QPS_INIT);
}

// ---------------------------------------------------------------- §3 masks

constexpr uint32_t kPkey = IBV_QP_PKEY_INDEX, kPort = IBV_QP_PORT, kAccess = IBV_QP_ACCESS_FLAGS,
                   kQkey = IBV_QP_QKEY, kAv = IBV_QP_AV, kMtu = IBV_QP_PATH_MTU,
                   kDqpn = IBV_QP_DEST_QPN, kRqPsn = IBV_QP_RQ_PSN, kSqPsn = IBV_QP_SQ_PSN,
                   kMaxDest = IBV_QP_MAX_DEST_RD_ATOMIC, kMaxRd = IBV_QP_MAX_QP_RD_ATOMIC,
                   kMinRnr = IBV_QP_MIN_RNR_TIMER, kTimeout = IBV_QP_TIMEOUT,
                   kRetry = IBV_QP_RETRY_CNT, kRnrRetry = IBV_QP_RNR_RETRY, kAlt = IBV_QP_ALT_PATH,
                   kCur = IBV_QP_CUR_STATE, kMig = IBV_QP_PATH_MIG_STATE,
                   kSqd = IBV_QP_EN_SQD_ASYNC_NOTIFY;

struct ExpectedRow {
  ibv_qp_type type;
  ibv_qp_state cur;
  ibv_qp_state next;
  uint32_t required;
  uint32_t optional;
};

// §3, plus XRC as the kernel's qp_state_table has it (XRC_INI = XRC_SEND,
// XRC_TGT = XRC_RECV). Legal pairs not listed take no attributes.
constexpr ExpectedRow kExpectedRows[] = {
    {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kPkey | kPort | kAccess, 0},
    {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkey | kPort | kAccess},
    {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kAv | kMtu | kDqpn | kRqPsn | kMaxDest | kMinRnr,
     kAlt | kAccess | kPkey},
    {IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kSqPsn | kTimeout | kRetry | kRnrRetry | kMaxRd,
     kCur | kAlt | kAccess | kMinRnr | kMig},
    {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, 0, kCur | kAccess | kAlt | kMig | kMinRnr},
    {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_SQD, 0, kSqd},
    {IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_RTS, 0, kCur | kAlt | kAccess | kMinRnr | kMig},
    {IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_SQD, 0,
     kPort | kAv | kTimeout | kRetry | kRnrRetry | kMaxRd | kMaxDest | kAlt | kAccess | kPkey |
         kMinRnr | kMig},

    {IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, kPkey | kPort | kAccess, 0},
    {IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkey | kPort | kAccess},
    {IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, kAv | kMtu | kDqpn | kRqPsn, kAlt | kAccess | kPkey},
    {IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, kSqPsn, kCur | kAlt | kAccess | kMig},
    {IBV_QPT_UC, IBV_QPS_RTS, IBV_QPS_RTS, 0, kCur | kAccess | kAlt | kMig},
    {IBV_QPT_UC, IBV_QPS_RTS, IBV_QPS_SQD, 0, kSqd},
    {IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_RTS, 0, kCur | kAlt | kAccess | kMig},
    {IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_SQD, 0, kAv | kAlt | kAccess | kPkey | kMig},
    {IBV_QPT_UC, IBV_QPS_SQE, IBV_QPS_RTS, 0, kCur | kAccess},

    {IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, kPkey | kPort | kQkey, 0},
    {IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkey | kPort | kQkey},
    {IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, 0, kPkey | kQkey},
    {IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, kSqPsn, kCur | kQkey},
    {IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_RTS, 0, kCur | kQkey},
    {IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_SQD, 0, kSqd},
    {IBV_QPT_UD, IBV_QPS_SQD, IBV_QPS_RTS, 0, kCur | kQkey},
    {IBV_QPT_UD, IBV_QPS_SQD, IBV_QPS_SQD, 0, kPkey | kQkey},
    {IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, 0, kCur | kQkey},

    {IBV_QPT_XRC_SEND, IBV_QPS_RESET, IBV_QPS_INIT, kPkey | kPort | kAccess, 0},
    {IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkey | kPort | kAccess},
    {IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, kAv | kMtu | kDqpn | kRqPsn,
     kAlt | kAccess | kPkey},
    {IBV_QPT_XRC_SEND, IBV_QPS_RTR, IBV_QPS_RTS, kTimeout | kRetry | kRnrRetry | kSqPsn | kMaxRd,
     kCur | kAlt | kAccess | kMig},
    {IBV_QPT_XRC_SEND, IBV_QPS_RTS, IBV_QPS_RTS, 0, kCur | kAccess | kAlt | kMig},
    {IBV_QPT_XRC_SEND, IBV_QPS_RTS, IBV_QPS_SQD, 0, kSqd},
    {IBV_QPT_XRC_SEND, IBV_QPS_SQD, IBV_QPS_RTS, 0, kCur | kAlt | kAccess | kMig},
    {IBV_QPT_XRC_SEND, IBV_QPS_SQD, IBV_QPS_SQD, 0,
     kPort | kAv | kTimeout | kRetry | kRnrRetry | kMaxRd | kAlt | kAccess | kPkey | kMig},

    {IBV_QPT_XRC_RECV, IBV_QPS_RESET, IBV_QPS_INIT, kPkey | kPort | kAccess, 0},
    {IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_INIT, 0, kPkey | kPort | kAccess},
    {IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, kAv | kMtu | kDqpn | kRqPsn | kMaxDest | kMinRnr,
     kAlt | kAccess | kPkey},
    {IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, kTimeout | kSqPsn,
     kCur | kAlt | kAccess | kMinRnr | kMig},
    {IBV_QPT_XRC_RECV, IBV_QPS_RTS, IBV_QPS_RTS, 0, kCur | kAccess | kAlt | kMig | kMinRnr},
    {IBV_QPT_XRC_RECV, IBV_QPS_RTS, IBV_QPS_SQD, 0, kSqd},
    {IBV_QPT_XRC_RECV, IBV_QPS_SQD, IBV_QPS_RTS, 0, kCur | kAlt | kAccess | kMinRnr | kMig},
    {IBV_QPT_XRC_RECV, IBV_QPS_SQD, IBV_QPS_SQD, 0,
     kPort | kAv | kTimeout | kMaxDest | kAlt | kAccess | kPkey | kMinRnr | kMig},
};

// Readable parameter names in ctest output instead of a byte dump.
void PrintTo(const ExpectedRow& r, std::ostream* os) {
  *os << TypeName(r.type) << ' ' << QpStateName(r.cur) << "->" << QpStateName(r.next);
}

std::vector<ExpectedRow> AllLegalCases() {
  std::vector<ExpectedRow> cases;
  for (ibv_qp_type type : kTypes) {
    for (int c = 0; c < 7; ++c) {
      for (int n = 0; n < 7; ++n) {
        if (!kExpectedLegal[c][n]) continue;
        ExpectedRow row{type, kStates[c], kStates[n], 0, 0};
        for (const ExpectedRow& r : kExpectedRows) {
          if (r.type == type && r.cur == row.cur && r.next == row.next) row = r;
        }
        cases.push_back(row);
      }
    }
  }
  return cases;
}

std::vector<uint32_t> Bits(uint32_t mask) {
  std::vector<uint32_t> bits;
  for (int b = 0; b < 32; ++b) {
    if ((mask & (1u << b)) != 0) bits.push_back(1u << b);
  }
  return bits;
}

class MaskTest : public testing::TestWithParam<ExpectedRow> {
 protected:
  int Try(uint32_t mask, ibv_qp_state* next_out = nullptr) const {
    const ExpectedRow& r = GetParam();
    return Modify(r.type, r.cur, GoodAttr(r.cur, r.next), mask, next_out);
  }
};

TEST_P(MaskTest, ExactRequiredMaskPasses) {
  const ExpectedRow& r = GetParam();
  ibv_qp_state next = IBV_QPS_UNKNOWN;
  EXPECT_EQ(Try(IBV_QP_STATE | r.required, &next), 0);
  EXPECT_EQ(next, r.next);
  if (r.cur == r.next) {
    next = IBV_QPS_UNKNOWN;
    EXPECT_EQ(Try(r.required, &next), 0) << "same-state modify without IBV_QP_STATE";
    EXPECT_EQ(next, r.next);
  }
}

TEST_P(MaskTest, DroppingAnyRequiredBitFails) {
  const ExpectedRow& r = GetParam();
  for (uint32_t bit : Bits(r.required)) {
    ibv_qp_state next = IBV_QPS_UNKNOWN;
    EXPECT_EQ(Try((IBV_QP_STATE | r.required) & ~bit, &next), EINVAL) << "without bit " << bit;
    EXPECT_EQ(next, IBV_QPS_UNKNOWN) << "next_out written on failure";
  }
}

TEST_P(MaskTest, AddingAnyNotAllowedBitFails) {
  const ExpectedRow& r = GetParam();
  const uint32_t allowed = IBV_QP_STATE | r.required | r.optional;
  for (uint32_t bit : Bits(~allowed)) {
    EXPECT_EQ(Try(IBV_QP_STATE | r.required | bit), EINVAL) << "with bit " << bit;
  }
}

TEST_P(MaskTest, EachOptionalBitAlonePasses) {
  const ExpectedRow& r = GetParam();
  for (uint32_t bit : Bits(r.optional)) {
    // ALT_PATH is in the IB table but refused on RoCE.
    const int expected = bit == IBV_QP_ALT_PATH ? EINVAL : 0;
    EXPECT_EQ(Try(IBV_QP_STATE | r.required | bit), expected) << "with bit " << bit;
  }
  EXPECT_EQ(Try(IBV_QP_STATE | r.required | (r.optional & ~IBV_QP_ALT_PATH)), 0) << "all optional";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MaskTest, testing::ValuesIn(AllLegalCases()),
                         [](const testing::TestParamInfo<ExpectedRow>& info) {
                           return TypeName(info.param.type) + "_" + QpStateName(info.param.cur) +
                                  "_to_" + QpStateName(info.param.next);
                         });

TEST(Mask, UnsupportedQpTypesFail) {
  const ibv_qp_attr a = GoodAttr(IBV_QPS_RESET, IBV_QPS_INIT);
  EXPECT_EQ(Modify(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, a, IBV_QP_STATE | kPort), EINVAL);
  EXPECT_EQ(Modify(IBV_QPT_DRIVER, IBV_QPS_RESET, a, IBV_QP_STATE), EINVAL);
}

TEST(Mask, CapAndRateLimitAreNeverAccepted) {
  for (const ExpectedRow& r : AllLegalCases()) {
    const ibv_qp_attr a = GoodAttr(r.cur, r.next);
    EXPECT_EQ(Modify(r.type, r.cur, a, IBV_QP_STATE | r.required | IBV_QP_CAP), EINVAL);
    EXPECT_EQ(Modify(r.type, r.cur, a, IBV_QP_STATE | r.required | IBV_QP_RATE_LIMIT), EINVAL);
  }
}

TEST(Mask, InvalidStatesFail) {
  ibv_qp_attr a = GoodAttr(IBV_QPS_RESET, IBV_QPS_UNKNOWN);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RESET, a, IBV_QP_STATE), EINVAL);
  a = GoodAttr(IBV_QPS_UNKNOWN, IBV_QPS_RESET);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_UNKNOWN, a, IBV_QP_STATE), EINVAL);
}

// ---------------------------------------------------------------- CUR_STATE

TEST(CurState, RefusedOutsideRtrRtsSqdSqe) {
  for (ibv_qp_state cur : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_ERR}) {
    for (ibv_qp_type type : kTypes) {
      EXPECT_EQ(Modify(type, cur, GoodAttr(cur, IBV_QPS_RESET), IBV_QP_STATE | kCur), EINVAL)
          << QpStateName(cur) << " " << TypeName(type);
    }
  }
  const ibv_qp_attr a = GoodAttr(IBV_QPS_INIT, IBV_QPS_INIT);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_INIT, a, IBV_QP_STATE | kCur), EINVAL);
}

TEST(CurState, AcceptedWhenItMatchesTheActualState) {
  ibv_qp_attr a = GoodAttr(IBV_QPS_RTR, IBV_QPS_RTS);
  const uint32_t rc_rts = IBV_QP_STATE | kSqPsn | kTimeout | kRetry | kRnrRetry | kMaxRd;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTR, a, rc_rts | kCur), 0);
  a.cur_qp_state = IBV_QPS_RTS;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTR, a, rc_rts | kCur), EINVAL);
  a.cur_qp_state = IBV_QPS_UNKNOWN;
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTR, a, rc_rts | kCur), EINVAL);
  // Without the CUR_STATE bit, cur_qp_state is not looked at.
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTR, a, rc_rts), 0);
}

TEST(CurState, SqeRecoveryOfUd) {
  ibv_qp_attr a = GoodAttr(IBV_QPS_SQE, IBV_QPS_RTS);
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_SQE, a, IBV_QP_STATE | kCur), 0);
  a.cur_qp_state = IBV_QPS_RTS;  // caller has not noticed the send error
  EXPECT_EQ(Modify(IBV_QPT_UD, IBV_QPS_SQE, a, IBV_QP_STATE | kCur), EINVAL);
}

TEST(CurState, RefusedWhereTheRowDoesNotAllowIt) {
  // RTS is a state where CUR_STATE may be asserted, but not towards SQD/ERR.
  const ibv_qp_attr a = GoodAttr(IBV_QPS_RTS, IBV_QPS_SQD);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTS, a, IBV_QP_STATE | kCur), EINVAL);
  const ibv_qp_attr e = GoodAttr(IBV_QPS_RTS, IBV_QPS_ERR);
  EXPECT_EQ(Modify(IBV_QPT_RC, IBV_QPS_RTS, e, IBV_QP_STATE | kCur), EINVAL);
}

// ---------------------------------------------------------------- §7 posting

struct ExpectedPost {
  ibv_qp_state state;
  int send;
  int recv;
  bool send_flush;
  bool recv_flush;
};

constexpr ExpectedPost kExpectedPost[] = {
    {IBV_QPS_RESET, EINVAL, EINVAL, false, false},
    {IBV_QPS_INIT, EINVAL, 0, false, false},
    {IBV_QPS_RTR, EINVAL, 0, false, false},
    {IBV_QPS_RTS, 0, 0, false, false},
    {IBV_QPS_SQD, 0, 0, false, false},
    {IBV_QPS_SQE, 0, 0, true, false},
    {IBV_QPS_ERR, 0, 0, true, true},
    {IBV_QPS_UNKNOWN, EINVAL, EINVAL, false, false},
};

void PrintTo(const ExpectedPost& p, std::ostream* os) {
  *os << QpStateName(p.state);
}

class PostStateTest : public testing::TestWithParam<ExpectedPost> {};

TEST_P(PostStateTest, MatchesExpected) {
  const ExpectedPost& p = GetParam();
  EXPECT_EQ(CheckPostSendState(p.state), p.send);
  EXPECT_EQ(CheckPostRecvState(p.state, /*has_srq=*/false), p.recv);
  EXPECT_EQ(CheckPostRecvState(p.state, /*has_srq=*/true), EINVAL);
  EXPECT_EQ(SendsFlushImmediately(p.state), p.send_flush);
  EXPECT_EQ(RecvsFlushImmediately(p.state), p.recv_flush);
}

INSTANTIATE_TEST_SUITE_P(AllStates, PostStateTest, testing::ValuesIn(kExpectedPost),
                         [](const testing::TestParamInfo<ExpectedPost>& info) {
                           return std::string(QpStateName(info.param.state));
                         });

TEST(QpStateName, NamesEveryState) {
  EXPECT_STREQ(QpStateName(IBV_QPS_RESET), "RESET");
  EXPECT_STREQ(QpStateName(IBV_QPS_INIT), "INIT");
  EXPECT_STREQ(QpStateName(IBV_QPS_RTR), "RTR");
  EXPECT_STREQ(QpStateName(IBV_QPS_RTS), "RTS");
  EXPECT_STREQ(QpStateName(IBV_QPS_SQD), "SQD");
  EXPECT_STREQ(QpStateName(IBV_QPS_SQE), "SQE");
  EXPECT_STREQ(QpStateName(IBV_QPS_ERR), "ERR");
  EXPECT_STREQ(QpStateName(IBV_QPS_UNKNOWN), "UNKNOWN");
}

}  // namespace
}  // namespace softrdma
