// ibv_modify_qp validation (§2–§4 of docs/qp-state-machine.md): state
// transition, attribute masks, then the value of every attribute present.
#include <cerrno>
#include <cstdint>

#include "core/qp_attr_masks.h"
#include "core/qp_state_machine.h"

namespace softrdma {
namespace {

constexpr int Valid(bool ok) {
  return ok ? 0 : EINVAL;
}

// Field widths on the wire / in the IBA attribute encoding.
constexpr int kMaxTimeoutExponent = 31;  // 5 bits: 4.096 us * 2^timeout, 0 = infinite
constexpr int kMaxRetryCount = 7;        // 3 bits (RNR: 7 = retry forever)
constexpr int kMaxMinRnrTimer = 31;      // 5-bit code carried in the RNR NAK
constexpr uint32_t kControlledQkeyBit = 1u << 31;

// Every ibv_access_flags bit rdma-core defines: 0-7 as in rdma-core 44,
// 8-9 (FLUSH_GLOBAL/PERSISTENT) from later releases, and the optional range.
// Programs pass MR-only bits such as LOCAL_WRITE in qp_access_flags (pyverbs'
// XRC, MR and atomic tests do; rxe and mlx5 accept them), so refusing what we
// do not implement would break them: we accept the defined bits, use only
// kSupportedQpAccess (EffectiveQpAccess), and refuse undefined bits, which can
// only be garbage.
constexpr unsigned kDefinedAccessBits = 0x3ffu | IBV_ACCESS_OPTIONAL_RANGE;

// A caller may assert the current state (IBV_QP_CUR_STATE) only from these:
// they are the states a QP can have left without a modify_qp (a send error
// moves UC/UD to SQE, a drain completes, any error moves to ERR), so the
// caller's belief can be stale. The assertion must also be true: acting on a
// state the QP is no longer in is exactly what it guards against.
constexpr unsigned kCurStateAssertable =
    (1u << IBV_QPS_RTR) | (1u << IBV_QPS_RTS) | (1u << IBV_QPS_SQD) | (1u << IBV_QPS_SQE);

int CheckCurStateAssertion(ibv_qp_state cur, const ibv_qp_attr& attr, uint32_t mask) {
  if ((mask & IBV_QP_CUR_STATE) == 0) return 0;
  if ((kCurStateAssertable & (1u << cur)) == 0) return EINVAL;
  return Valid(static_cast<int>(attr.cur_qp_state) == static_cast<int>(cur));
}

using ValueCheck = int (*)(const ibv_qp_attr&, const ModifyContext&);

int CheckAccessFlags(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid((a.qp_access_flags & ~kDefinedAccessBits) == 0);
}
int CheckPkeyIndex(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.pkey_index < limits::kPkeyTableLen);
}
int CheckPort(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.port_num == limits::kPortNum);
}
// Q_Keys with the high bit set are reserved to privileged consumers, so that
// an ordinary process cannot impersonate e.g. the subnet services on UD.
int CheckQkey(const ibv_qp_attr& a, const ModifyContext& ctx) {
  return (a.qkey & kControlledQkeyBit) != 0 && !ctx.privileged ? EPERM : 0;
}
int CheckAv(const ibv_qp_attr& a, const ModifyContext& ctx) {
  return CheckRoceAddressVector(a.ah_attr, ctx);
}
int CheckPathMtu(const ibv_qp_attr& a, const ModifyContext& ctx) {
  const int mtu = a.path_mtu;
  return Valid(mtu >= IBV_MTU_256 && mtu <= static_cast<int>(ctx.port_max_mtu));
}
int CheckTimeout(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.timeout <= kMaxTimeoutExponent);
}
int CheckRetryCnt(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.retry_cnt <= kMaxRetryCount);
}
int CheckRnrRetry(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.rnr_retry <= kMaxRetryCount);
}
int CheckMaxRdAtomic(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.max_rd_atomic <= limits::kMaxQpInitRdAtom);
}
// Automatic path migration needs a second, independently routed path, which
// only native InfiniBand has; the kernel refuses ALT_PATH on RoCE ports.
int RefuseAltPath(const ibv_qp_attr&, const ModifyContext&) {
  return EINVAL;
}
int CheckMinRnrTimer(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.min_rnr_timer <= kMaxMinRnrTimer);
}
int CheckMaxDestRdAtomic(const ibv_qp_attr& a, const ModifyContext&) {
  return Valid(a.max_dest_rd_atomic <= limits::kMaxQpRdAtom);
}
int CheckMigState(const ibv_qp_attr& a, const ModifyContext&) {
  const int state = a.path_mig_state;
  return Valid(state >= IBV_MIG_MIGRATED && state <= IBV_MIG_ARMED);
}

struct ValueRule {
  uint32_t bit;
  ValueCheck check;
};

// One rule per attribute, applied when its bit is in the mask. Bits without a
// rule need none (PSNs and DEST_QPN are masked to 24 bits when applied;
// EN_SQD_ASYNC_NOTIFY is a boolean), or can never pass the mask table (CAP,
// RATE_LIMIT).
constexpr ValueRule kValueRules[] = {
    {IBV_QP_ACCESS_FLAGS, CheckAccessFlags},
    {IBV_QP_PKEY_INDEX, CheckPkeyIndex},
    {IBV_QP_PORT, CheckPort},
    {IBV_QP_QKEY, CheckQkey},
    {IBV_QP_AV, CheckAv},
    {IBV_QP_PATH_MTU, CheckPathMtu},
    {IBV_QP_TIMEOUT, CheckTimeout},
    {IBV_QP_RETRY_CNT, CheckRetryCnt},
    {IBV_QP_RNR_RETRY, CheckRnrRetry},
    {IBV_QP_MAX_QP_RD_ATOMIC, CheckMaxRdAtomic},
    {IBV_QP_ALT_PATH, RefuseAltPath},
    {IBV_QP_MIN_RNR_TIMER, CheckMinRnrTimer},
    {IBV_QP_MAX_DEST_RD_ATOMIC, CheckMaxDestRdAtomic},
    {IBV_QP_PATH_MIG_STATE, CheckMigState},
};

}  // namespace

// On InfiniBand a packet is delivered inside the subnet by its destination
// LID; the GRH is only needed to cross subnets, so a LID-only address vector
// is normal there. Ethernet has no LIDs: a RoCEv2 packet is a UDP/IP datagram
// whose IP source and destination are the GRH's SGID and DGID (IPv4-mapped
// for IPv4), and routers and switches forward it by those. Without a GRH
// there is nothing to address the packet to, so RoCE NICs and rxe refuse
// is_global == 0 -- which is why ibv_rc_pingpong without -g cannot reach RTR
// on a RoCE port. sgid_index picks the local address (and with it IPv4 vs
// IPv6 and the source MAC), so it must name a populated GID table entry. The
// AV's port must exist too (the kernel checks it before the driver does).
int CheckRoceAddressVector(const ibv_ah_attr& ah, const ModifyContext& ctx) {
  if (ah.is_global == 0) return EINVAL;
  if (ah.port_num != limits::kPortNum) return EINVAL;
  if (ah.grh.sgid_index >= limits::kGidTableLen) return EINVAL;
  return Valid(((ctx.valid_gid_mask >> ah.grh.sgid_index) & 1u) != 0);
}

int CheckModifyQp(ibv_qp_type type, ibv_qp_state cur, const ibv_qp_attr& attr, int attr_mask,
                  const ModifyContext& ctx, ibv_qp_state* next_out) {
  const uint32_t mask = static_cast<uint32_t>(attr_mask);
  if (!IsQpState(cur)) return EINVAL;

  // Without IBV_QP_STATE the QP stays where it is, and that cur -> cur pair
  // must itself be legal (mlx5's strict reading; rxe skips the check).
  ibv_qp_state next = cur;
  if ((mask & IBV_QP_STATE) != 0) {
    if (!IsQpState(attr.qp_state)) return EINVAL;
    next = attr.qp_state;
  }
  if (!IsLegalTransition(cur, next)) return EINVAL;
  if (int err = CheckCurStateAssertion(cur, attr, mask)) return err;

  const std::optional<AttrMasks> masks = LookupAttrMasks(type, cur, next);
  if (!masks) return EINVAL;
  if ((mask & masks->required) != masks->required) return EINVAL;
  if ((mask & ~(masks->required | masks->optional | IBV_QP_STATE)) != 0) return EINVAL;

  for (const ValueRule& rule : kValueRules) {
    if ((mask & rule.bit) == 0) continue;
    if (int err = rule.check(attr, ctx)) return err;
  }
  if (next_out != nullptr) *next_out = next;
  return 0;
}

}  // namespace softrdma
