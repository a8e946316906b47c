// State table, post-time rules and state names (§2, §6, §7 of
// docs/qp-state-machine.md). Attribute rules live in qp_modify_check.cpp.
#include "core/qp_state_machine.h"

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

constexpr const char* kStateNames[kQpStateCount + 1] = {
    "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN",
};

}  // namespace

bool IsLegalTransition(ibv_qp_state cur, ibv_qp_state next) {
  if (!IsQpState(cur) || !IsQpState(next)) return false;
  return (kLegalNext[cur] & Bit(next)) != 0;
}

const char* QpStateName(ibv_qp_state s) {
  if (s < IBV_QPS_RESET || s > IBV_QPS_UNKNOWN) return "INVALID";
  return kStateNames[s];
}

}  // namespace softrdma
