// Public verbs that softrdma exports but does not implement yet. Every
// symbol must exist because clients are linked BIND_NOW (a missing one stops
// the whole program at load time, even if it never calls it); each fails the
// way its man page documents a failure, with EOPNOTSUPP as the reason, so
// callers take their "not supported" path:
//   - pointer results: NULL, errno = EOPNOTSUPP;
//   - verbs documented to return an errno value: EOPNOTSUPP (errno set too);
//   - ibv_query_qp_data_in_order: 0 ("not guaranteed in order", a valid answer);
//   - void verbs: nothing (there is never anything to release).
// docs/abi.md lists the status of each one. Prototypes are verbs.h's.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

namespace {

template <typename T>
T* fail_null() noexcept {
  errno = EOPNOTSUPP;
  return nullptr;
}

int fail_errno() noexcept {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

extern "C" {

// Address resolution to Ethernet L2 (a provider helper).

SOFTRDMA_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context* /*context*/,
                                                struct ibv_ah_attr* /*attr*/,
                                                uint8_t /*eth_mac*/[ETHERNET_LL_SIZE],
                                                uint16_t* /*vid*/) {
  return fail_errno();
}

// Device memory is not imitated, so there is none to share.

SOFTRDMA_EXPORT struct ibv_dm* ibv_import_dm(struct ibv_context* /*context*/,
                                             uint32_t /*dm_handle*/) {
  return fail_null<ibv_dm>();
}

SOFTRDMA_EXPORT void ibv_unimport_dm(struct ibv_dm* /*dm*/) {}

// Enhanced connection establishment (ECE).

SOFTRDMA_EXPORT int ibv_query_ece(struct ibv_qp* /*qp*/, struct ibv_ece* /*ece*/) {
  return fail_errno();
}

SOFTRDMA_EXPORT int ibv_set_ece(struct ibv_qp* /*qp*/, struct ibv_ece* /*ece*/) {
  return fail_errno();
}

// Memory registration of dma-buf file descriptors.

SOFTRDMA_EXPORT struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* /*pd*/, uint64_t /*offset*/,
                                                 size_t /*length*/, uint64_t /*iova*/, int /*fd*/,
                                                 int /*access*/) {
  return fail_null<ibv_mr>();
}

// QP data placement ordering: 0 is the conservative answer ("not guaranteed"),
// which is always correct, so this one does not set errno.

SOFTRDMA_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp* /*qp*/, enum ibv_wr_opcode /*op*/,
                                               uint32_t /*flags*/) {
  return 0;
}

}  // extern "C"
