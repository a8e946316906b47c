// Exported kernel-struct conversions (rdma-core declares them in its
// infiniband/marshall.h, which Debian does not install; the prototypes below
// are the ABI). Thin C shims over util/kern_abi_conv.
#include "abi/verbs/symver.h"
#include "util/kern_abi_conv.h"

extern "C" {

// A NULL argument is a caller bug; doing nothing beats crashing inside the
// library that the caller would then blame.

SOFTRDMA_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst,
                                                struct ib_uverbs_qp_attr* src) {
  if (dst != nullptr && src != nullptr) softrdma::copy_qp_attr_from_kern(*dst, *src);
}

SOFTRDMA_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst,
                                                struct ib_uverbs_ah_attr* src) {
  if (dst != nullptr && src != nullptr) softrdma::copy_ah_attr_from_kern(*dst, *src);
}

SOFTRDMA_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst,
                                                 struct ib_user_path_rec* src) {
  if (dst != nullptr && src != nullptr) softrdma::copy_path_rec_from_kern(*dst, *src);
}

SOFTRDMA_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst,
                                               struct ibv_sa_path_rec* src) {
  if (dst != nullptr && src != nullptr) softrdma::copy_path_rec_to_kern(*dst, *src);
}

}  // extern "C"
