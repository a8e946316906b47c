// State table, post-time rules and state names (§2, §6, §7 of
// docs/qp-state-machine.md). Attribute rules live in qp_modify_check.cpp.
#include "core/qp_state_machine.h"

#include <cerrno>
#include <cstdint>

namespace softrdma {
namespace {

constexpr uint8_t Bit(ibv_qp_state s) {
  return static_cast<uint8_t>(1u << s);
}

// Row = current state, bit n = transition to state n is legal. Any state may
// go to RESET, any but RESET to ERR; the rest is the IBA's connection setup
// (RESET→INIT→RTR→RTS), draining (RTS↔SQD) and UC/UD send-queue error
// recovery (SQE→RTS). Same-state rows are absent for RTR and SQE because
// their attributes cannot be changed in place.
constexpr uint8_t kLegalNext[kQpStateCount] = {
    /* RESET */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_INIT),
    /* INIT  */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_INIT) | Bit(IBV_QPS_RTR) | Bit(IBV_QPS_ERR),
    /* RTR   */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_RTS) | Bit(IBV_QPS_ERR),
    /* RTS   */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_RTS) | Bit(IBV_QPS_SQD) | Bit(IBV_QPS_ERR),
    /* SQD   */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_RTS) | Bit(IBV_QPS_SQD) | Bit(IBV_QPS_ERR),
    /* SQE   */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_RTS) | Bit(IBV_QPS_ERR),
    /* ERR   */ Bit(IBV_QPS_RESET) | Bit(IBV_QPS_ERR),
};

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
constexpr PostRule kPostRules[kQpStateCount] = {
    /* RESET */ {false, false, false, false},
    /* INIT  */ {false, true, false, false},
    /* RTR   */ {false, true, false, false},
    /* RTS   */ {true, true, false, false},
    /* SQD   */ {true, true, false, false},
    /* SQE   */ {true, true, true, false},
    /* ERR   */ {true, true, true, true},
};

constexpr const char* kStateNames[kQpStateCount + 1] = {
    "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN",
};

}  // namespace

bool IsLegalTransition(ibv_qp_state cur, ibv_qp_state next) {
  if (!IsQpState(cur) || !IsQpState(next)) return false;
  return (kLegalNext[cur] & Bit(next)) != 0;
}

int CheckPostSendState(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].send_accepted ? 0 : EINVAL;
}

int CheckPostRecvState(ibv_qp_state s, bool has_srq) {
  // Receives of a QP attached to an SRQ are posted to the SRQ, never the QP.
  if (has_srq) return EINVAL;
  return IsQpState(s) && kPostRules[s].recv_accepted ? 0 : EINVAL;
}

bool SendsFlushImmediately(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].send_flushes;
}

bool RecvsFlushImmediately(ibv_qp_state s) {
  return IsQpState(s) && kPostRules[s].recv_flushes;
}

const char* QpStateName(ibv_qp_state s) {
  if (s < IBV_QPS_RESET || s > IBV_QPS_UNKNOWN) return "INVALID";
  return kStateNames[s];
}

}  // namespace softrdma
