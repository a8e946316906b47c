// The attribute-mask table of ibv_modify_qp (§3 of docs/qp-state-machine.md):
// for each legal transition and QP type, which ibv_qp_attr_mask bits must be
// present and which may be. Internal to the core; CheckModifyQp is its user.
#pragma once

#include <cstdint>
#include <optional>

#include <infiniband/verbs.h>

namespace softrdma {

struct AttrMasks {
  uint32_t required = 0;
  uint32_t optional = 0;  // besides IBV_QP_STATE, which every transition allows
};

// nullopt if softrdma does not implement QP type `type`. For a legal
// transition without a row (-> RESET, -> ERR, RESET -> RESET, ERR -> ERR) the
// masks are empty: only IBV_QP_STATE may be given. Legality itself is
// IsLegalTransition's business; the caller checks it first.
std::optional<AttrMasks> LookupAttrMasks(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next);

}  // namespace softrdma
