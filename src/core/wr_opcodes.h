// Which send opcodes a QP type accepts (ibv_post_send.3) and which of those
// softrdma implements: the one table ibv_post_send's validation consults.
// When an opcode gets implemented, add it to kImplementedOps; the validity
// per QP type is the spec's and does not change.
#pragma once

#include <cerrno>
#include <cstdint>

#include <infiniband/verbs.h>

namespace softrdma {

constexpr uint32_t OpBit(ibv_wr_opcode op) {
  return 1u << op;
}

inline constexpr uint32_t kUdOps = OpBit(IBV_WR_SEND) | OpBit(IBV_WR_SEND_WITH_IMM);
inline constexpr uint32_t kUcOps = kUdOps | OpBit(IBV_WR_RDMA_WRITE) |
                                   OpBit(IBV_WR_RDMA_WRITE_WITH_IMM) | OpBit(IBV_WR_LOCAL_INV) |
                                   OpBit(IBV_WR_BIND_MW) | OpBit(IBV_WR_SEND_WITH_INV);
inline constexpr uint32_t kRcOps = kUcOps | OpBit(IBV_WR_RDMA_READ) |
                                   OpBit(IBV_WR_ATOMIC_CMP_AND_SWP) |
                                   OpBit(IBV_WR_ATOMIC_FETCH_AND_ADD);

// Implemented today, for every QP type that accepts them.
inline constexpr uint32_t kImplementedOps =
    OpBit(IBV_WR_SEND) | OpBit(IBV_WR_SEND_WITH_IMM) | OpBit(IBV_WR_RDMA_WRITE) |
    OpBit(IBV_WR_RDMA_WRITE_WITH_IMM) | OpBit(IBV_WR_RDMA_READ) | OpBit(IBV_WR_ATOMIC_CMP_AND_SWP) |
    OpBit(IBV_WR_ATOMIC_FETCH_AND_ADD) | OpBit(IBV_WR_BIND_MW) | OpBit(IBV_WR_LOCAL_INV) |
    OpBit(IBV_WR_SEND_WITH_INV);

constexpr uint32_t ValidOps(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC:
    case IBV_QPT_XRC_SEND:
      return kRcOps;
    case IBV_QPT_UC:
      return kUcOps;
    case IBV_QPT_UD:
      return kUdOps;
    default:
      return 0;
  }
}

// 0, EINVAL (not an opcode of this QP type) or EOPNOTSUPP (valid, not
// implemented yet: fail loudly rather than pretend).
// The accepted case is one test of the combined mask (every post asks).
constexpr int CheckSendOpcode(ibv_qp_type type, ibv_wr_opcode op) {
  if (static_cast<uint32_t>(op) > static_cast<uint32_t>(IBV_WR_DRIVER1)) return EINVAL;
  const uint32_t valid = ValidOps(type);
  if (valid & kImplementedOps & OpBit(op)) return 0;
  return (valid & OpBit(op)) ? EOPNOTSUPP : EINVAL;
}
static_assert(CheckSendOpcode(IBV_QPT_RC, IBV_WR_SEND) == 0);
static_assert(CheckSendOpcode(IBV_QPT_UD, IBV_WR_RDMA_WRITE) == EINVAL);
static_assert(CheckSendOpcode(IBV_QPT_RC, IBV_WR_TSO) == EINVAL);
static_assert(CheckSendOpcode(IBV_QPT_RC, static_cast<ibv_wr_opcode>(-1)) == EINVAL);

}  // namespace softrdma
