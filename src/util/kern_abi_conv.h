// Conversions between the kernel uverbs/SA structures (<rdma/ib_user_verbs.h>,
// <rdma/ib_user_sa.h>) and their libibverbs counterparts, as exported by
// libibverbs for librdmacm-style callers (ibv_copy_*_from_kern/_to_kern).
//
// The layouts differ (widths, order, enums vs. __u32), so each field is copied
// by name; byte order is kept: fields that are big-endian on one side
// (path record LIDs, P_Key, flow label) are big-endian on the other too.
#pragma once

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

namespace softrdma {

void copy_ah_attr_from_kern(ibv_ah_attr& dst, const ib_uverbs_ah_attr& src) noexcept;

// ibv_qp_attr::rate_limit has no kernel counterpart and is left untouched;
// the kernel's qp_attr_mask has no place in ibv_qp_attr and is dropped.
// qp_state is copied like every other field. (rdma-core 44 leaves
// dst.qp_state untouched, measured; its one caller, librdmacm's
// rdma_init_qp_attr, passes in the state it asked the kernel about, which the
// kernel echoes back, so copying gives the same result there.)
void copy_qp_attr_from_kern(ibv_qp_attr& dst, const ib_uverbs_qp_attr& src) noexcept;

void copy_path_rec_from_kern(ibv_sa_path_rec& dst, const ib_user_path_rec& src) noexcept;
void copy_path_rec_to_kern(ib_user_path_rec& dst, const ibv_sa_path_rec& src) noexcept;

}  // namespace softrdma
