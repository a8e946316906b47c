#include "core/qp_attr_masks.h"

namespace softrdma {
namespace {

// Short names so that each row of the table reads as one line of §3.
constexpr uint32_t kCur = IBV_QP_CUR_STATE;
constexpr uint32_t kSqdNotify = IBV_QP_EN_SQD_ASYNC_NOTIFY;
constexpr uint32_t kAccess = IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kPkey = IBV_QP_PKEY_INDEX;
constexpr uint32_t kPort = IBV_QP_PORT;
constexpr uint32_t kQkey = IBV_QP_QKEY;
constexpr uint32_t kAv = IBV_QP_AV;
constexpr uint32_t kMtu = IBV_QP_PATH_MTU;
constexpr uint32_t kTimeout = IBV_QP_TIMEOUT;
constexpr uint32_t kRetry = IBV_QP_RETRY_CNT;
constexpr uint32_t kRnrRetry = IBV_QP_RNR_RETRY;
constexpr uint32_t kRqPsn = IBV_QP_RQ_PSN;
constexpr uint32_t kMaxRd = IBV_QP_MAX_QP_RD_ATOMIC;
constexpr uint32_t kAlt = IBV_QP_ALT_PATH;
constexpr uint32_t kMinRnr = IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kSqPsn = IBV_QP_SQ_PSN;
constexpr uint32_t kMaxDestRd = IBV_QP_MAX_DEST_RD_ATOMIC;
constexpr uint32_t kMig = IBV_QP_PATH_MIG_STATE;
constexpr uint32_t kDestQpn = IBV_QP_DEST_QPN;

// The three base columns of the table; XRC types borrow the RC column.
enum Column { kRc, kUc, kUd, kColumnCount };

struct Row {
  ibv_qp_state cur;
  ibv_qp_state next;
  AttrMasks by_column[kColumnCount];  // {required, optional} for RC, UC, UD
};

// UD has no connection, so it never takes AV/DEST_QPN/PSN-of-peer attributes
// but needs a Q_Key; UC is RC without acknowledgements, so it lacks every
// attribute of the ACK/retry/RDMA-READ machinery (timeouts, retry counts,
// RNR timer, rd_atomic depths). ALT_PATH rows are kept as in the kernel
// table; RoCE refuses ALT_PATH separately (qp_modify_check.cpp).
constexpr Row kRows[] = {
    {IBV_QPS_RESET,
     IBV_QPS_INIT,
     {{kPkey | kPort | kAccess, 0}, {kPkey | kPort | kAccess, 0}, {kPkey | kPort | kQkey, 0}}},
    {IBV_QPS_INIT,
     IBV_QPS_INIT,
     {{0, kPkey | kPort | kAccess}, {0, kPkey | kPort | kAccess}, {0, kPkey | kPort | kQkey}}},
    {IBV_QPS_INIT,
     IBV_QPS_RTR,
     {{kAv | kMtu | kDestQpn | kRqPsn | kMaxDestRd | kMinRnr, kAlt | kAccess | kPkey},
      {kAv | kMtu | kDestQpn | kRqPsn, kAlt | kAccess | kPkey},
      {0, kPkey | kQkey}}},
    {IBV_QPS_RTR,
     IBV_QPS_RTS,
     {{kSqPsn | kTimeout | kRetry | kRnrRetry | kMaxRd, kCur | kAlt | kAccess | kMinRnr | kMig},
      {kSqPsn, kCur | kAlt | kAccess | kMig},
      {kSqPsn, kCur | kQkey}}},
    {IBV_QPS_RTS,
     IBV_QPS_RTS,
     {{0, kCur | kAccess | kAlt | kMig | kMinRnr},
      {0, kCur | kAccess | kAlt | kMig},
      {0, kCur | kQkey}}},
    {IBV_QPS_RTS, IBV_QPS_SQD, {{0, kSqdNotify}, {0, kSqdNotify}, {0, kSqdNotify}}},
    {IBV_QPS_SQD,
     IBV_QPS_RTS,
     {{0, kCur | kAlt | kAccess | kMinRnr | kMig},
      {0, kCur | kAlt | kAccess | kMig},
      {0, kCur | kQkey}}},
    // Drained is the one place where path and retry parameters may change
    // without tearing the connection down.
    {IBV_QPS_SQD,
     IBV_QPS_SQD,
     {{0, kPort | kAv | kTimeout | kRetry | kRnrRetry | kMaxRd | kMaxDestRd | kAlt | kAccess |
              kPkey | kMinRnr | kMig},
      {0, kAv | kAlt | kAccess | kPkey | kMig},
      {0, kPkey | kQkey}}},
    // SQE exists only for UC/UD; the RC entry is empty but the pair is still
    // legal (the table is per state pair, and an RC QP never enters SQE).
    {IBV_QPS_SQE, IBV_QPS_RTS, {{0, 0}, {0, kCur | kAccess}, {0, kCur | kQkey}}},
};

// Attributes only the responder side of a reliable connection uses (how many
// incoming READ/atomic requests it may hold, how long a peer must back off
// after an RNR NAK), and those only the requester side uses (retry counters,
// outstanding READ/atomic depth).
constexpr uint32_t kResponderOnly = kMaxDestRd | kMinRnr;
constexpr uint32_t kRequesterOnly = kRetry | kRnrRetry | kMaxRd;

struct TypeRule {
  ibv_qp_type type;
  Column column;
  uint32_t removed;  // bits of the column that this type neither needs nor accepts
};

// XRC is how the kernel table treats it: its XRC_INI (IBV_QPT_XRC_SEND) and
// XRC_TGT (IBV_QPT_XRC_RECV) columns equal the RC column minus the side the
// QP does not have. An XRC send QP has no receive queue, so it never answers
// requests: no MAX_DEST_RD_ATOMIC / MIN_RNR_TIMER (its INIT->RTR therefore
// needs only AV, PATH_MTU, DEST_QPN, RQ_PSN). An XRC receive QP never starts
// requests: no RETRY_CNT / RNR_RETRY / MAX_QP_RD_ATOMIC, yet its RTR->RTS
// still requires TIMEOUT and SQ_PSN. Confirmed against the kernel's
// qp_state_table rows and the masks that rdma-core's xsrq_pingpong and
// pyverbs (QP._get_comp_mask) pass; not in docs/qp-state-machine.md.
// UNCONFIRMED: why XRC_TGT needs TIMEOUT/SQ_PSN (no spec text at hand).
// GSI/SMI (QP0/QP1) rows are not here: libibverbs has no ibv_qp_type for them.
constexpr TypeRule kTypes[] = {
    {IBV_QPT_RC, kRc, 0},
    {IBV_QPT_UC, kUc, 0},
    {IBV_QPT_UD, kUd, 0},
    {IBV_QPT_XRC_SEND, kRc, kResponderOnly},
    {IBV_QPT_XRC_RECV, kRc, kRequesterOnly},
};

}  // namespace

std::optional<AttrMasks> LookupAttrMasks(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next) {
  for (const TypeRule& t : kTypes) {
    if (t.type != type) continue;
    for (const Row& row : kRows) {
      if (row.cur != cur || row.next != next) continue;
      const AttrMasks& m = row.by_column[t.column];
      return AttrMasks{m.required & ~t.removed, m.optional & ~t.removed};
    }
    return AttrMasks{};
  }
  return std::nullopt;
}

}  // namespace softrdma
