// The QP state machine and the rules that decide whether ibv_modify_qp,
// ibv_post_send and ibv_post_recv are accepted (docs/qp-state-machine.md).
// Pure functions over tables: no QP object, no locking, no side effects, so
// the verbs layer, both wires and the tests all ask the same place.
#pragma once

#include <cerrno>
#include <cstdint>

#include <infiniband/verbs.h>

#include "core/limits.h"

namespace softrdma {

// Number of real states, RESET..ERR. IBV_QPS_UNKNOWN is a libibverbs-only
// value that a QP is never in.
inline constexpr int kQpStateCount = IBV_QPS_ERR + 1;

constexpr bool IsQpState(int s) {
  return s >= IBV_QPS_RESET && s <= IBV_QPS_ERR;
}

// What a modify-QP check needs to know beyond the QP's own type and state.
struct ModifyContext {
  // Bit i set = GID table entry i is populated, so sgid_index i is usable.
  // A mask rather than a callback: no allocation, trivially copyable, and the
  // GID table (kGidTableLen entries) fits.
  uint64_t valid_gid_mask = 0;
  ibv_mtu port_max_mtu = limits::kMaxMtu;
  // Caller may set a Q_Key with bit 31 ("controlled" Q_Key; CAP_NET_RAW on Linux).
  bool privileged = false;
};
static_assert(limits::kGidTableLen <= 64, "valid_gid_mask must cover the GID table");

// Whether cur -> next appears in the transition table (§2). A modify without
// IBV_QP_STATE is cur -> cur, so RTR -> RTR and SQE -> SQE are illegal.
bool IsLegalTransition(ibv_qp_state cur, ibv_qp_state next);

// Validates one ibv_modify_qp call against the state table, the per-transition
// attribute masks (§3) and the value ranges (§4). Returns 0 and stores the
// resulting state in *next_out (if non-null), or returns EINVAL (EPERM for an
// unprivileged Q_Key with bit 31 set) and leaves *next_out untouched. The
// caller applies attributes only after 0, so a failed modify changes nothing.
int CheckModifyQp(ibv_qp_type type, ibv_qp_state cur, const ibv_qp_attr& attr, int attr_mask,
                  const ModifyContext& ctx, ibv_qp_state* next_out);

// The address-vector rule of a RoCE port: 0 or EINVAL. See the .cpp for why a
// LID-only address vector cannot work on Ethernet.
int CheckRoceAddressVector(const ibv_ah_attr& ah, const ModifyContext& ctx);

// The qp_access_flags a QP really gets: CheckModifyQp accepts every flag
// libibverbs defines (programs routinely pass IBV_ACCESS_LOCAL_WRITE), but
// only the remote-access bits mean anything for a QP.
constexpr unsigned EffectiveQpAccess(unsigned qp_access_flags) {
  return qp_access_flags & limits::kSupportedQpAccess;
}

// Post-time state rules (§6, §7), inline: every post asks them.
struct PostRule {
  bool send_accepted;
  bool recv_accepted;  // without an SRQ
  bool send_flushes;
  bool recv_flushes;
};

// Receives may be posted from INIT so that buffers are ready before the
// peer's first message can arrive (C10-97.2.1); sends need RTS. SQD keeps new
// sends queued (not started), SQE and ERR accept WRs only to flush them, so
// that a program can always post and reap without checking the state first.
inline constexpr PostRule kPostRules[kQpStateCount] = {
    /* RESET */ {false, false, false, false},
    /* INIT  */ {false, true, false, false},
    /* RTR   */ {false, true, false, false},
    /* RTS   */ {true, true, false, false},
    /* SQD   */ {true, true, false, false},
    /* SQE   */ {true, true, true, false},
    /* ERR   */ {true, true, true, true},
};

// 0 if a WR may be posted in state s, else EINVAL.
inline int CheckPostSendState(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].send_accepted ? 0 : EINVAL;
}
inline int CheckPostRecvState(ibv_qp_state s, bool has_srq) {
  // Receives of a QP attached to an SRQ are posted to the SRQ, never the QP.
  if (has_srq) return EINVAL;
  return IsQpState(s) && kPostRules[s].recv_accepted ? 0 : EINVAL;
}

// Whether WRs accepted in state s complete at once with IBV_WC_WR_FLUSH_ERR
// instead of being executed (§6, §7).
inline bool SendsFlushImmediately(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].send_flushes;
}
inline bool RecvsFlushImmediately(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].recv_flushes;
}

// "RESET", "INIT", ... for logs; "INVALID" for values outside the enum.
const char* QpStateName(ibv_qp_state s);

}  // namespace softrdma
