#include "util/kern_abi_conv.h"

#include <cstring>

namespace softrdma {

// The GID arrays are raw network-order bytes on both sides; a static_assert
// keeps memcpy honest should either definition ever change size.
static_assert(sizeof(ibv_gid::raw) == sizeof(ib_uverbs_global_route::dgid));
static_assert(sizeof(ibv_gid::raw) == sizeof(ib_user_path_rec::dgid));
static_assert(sizeof(ibv_gid::raw) == sizeof(ib_user_path_rec::sgid));

void copy_ah_attr_from_kern(ibv_ah_attr& dst, const ib_uverbs_ah_attr& src) noexcept {
  std::memcpy(dst.grh.dgid.raw, src.grh.dgid, sizeof(dst.grh.dgid.raw));
  dst.grh.flow_label = src.grh.flow_label;
  dst.grh.sgid_index = src.grh.sgid_index;
  dst.grh.hop_limit = src.grh.hop_limit;
  dst.grh.traffic_class = src.grh.traffic_class;
  dst.dlid = src.dlid;
  dst.sl = src.sl;
  dst.src_path_bits = src.src_path_bits;
  dst.static_rate = src.static_rate;
  dst.is_global = src.is_global;
  dst.port_num = src.port_num;
}

void copy_qp_attr_from_kern(ibv_qp_attr& dst, const ib_uverbs_qp_attr& src) noexcept {
  dst.qp_state = static_cast<ibv_qp_state>(src.qp_state);
  dst.cur_qp_state = static_cast<ibv_qp_state>(src.cur_qp_state);
  dst.path_mtu = static_cast<ibv_mtu>(src.path_mtu);
  dst.path_mig_state = static_cast<ibv_mig_state>(src.path_mig_state);
  dst.qkey = src.qkey;
  dst.rq_psn = src.rq_psn;
  dst.sq_psn = src.sq_psn;
  dst.dest_qp_num = src.dest_qp_num;
  dst.qp_access_flags = src.qp_access_flags;

  dst.cap.max_send_wr = src.max_send_wr;
  dst.cap.max_recv_wr = src.max_recv_wr;
  dst.cap.max_send_sge = src.max_send_sge;
  dst.cap.max_recv_sge = src.max_recv_sge;
  dst.cap.max_inline_data = src.max_inline_data;

  copy_ah_attr_from_kern(dst.ah_attr, src.ah_attr);
  copy_ah_attr_from_kern(dst.alt_ah_attr, src.alt_ah_attr);

  dst.pkey_index = src.pkey_index;
  dst.alt_pkey_index = src.alt_pkey_index;
  dst.en_sqd_async_notify = src.en_sqd_async_notify;
  dst.sq_draining = src.sq_draining;
  dst.max_rd_atomic = src.max_rd_atomic;
  dst.max_dest_rd_atomic = src.max_dest_rd_atomic;
  dst.min_rnr_timer = src.min_rnr_timer;
  dst.port_num = src.port_num;
  dst.timeout = src.timeout;
  dst.retry_cnt = src.retry_cnt;
  dst.rnr_retry = src.rnr_retry;
  dst.alt_port_num = src.alt_port_num;
  dst.alt_timeout = src.alt_timeout;
}

void copy_path_rec_from_kern(ibv_sa_path_rec& dst, const ib_user_path_rec& src) noexcept {
  std::memcpy(dst.dgid.raw, src.dgid, sizeof(dst.dgid.raw));
  std::memcpy(dst.sgid.raw, src.sgid, sizeof(dst.sgid.raw));
  dst.dlid = src.dlid;
  dst.slid = src.slid;
  dst.raw_traffic = static_cast<int>(src.raw_traffic);
  dst.flow_label = src.flow_label;
  dst.hop_limit = src.hop_limit;
  dst.traffic_class = src.traffic_class;
  dst.reversible = static_cast<int>(src.reversible);
  dst.numb_path = src.numb_path;
  dst.pkey = src.pkey;
  dst.sl = src.sl;
  dst.mtu_selector = src.mtu_selector;
  // The kernel carries the MTU enum in 32 bits, libibverbs in 8; valid
  // values (IB_MTU_256..IB_MTU_4096 = 1..5) fit either way.
  dst.mtu = static_cast<uint8_t>(src.mtu);
  dst.rate_selector = src.rate_selector;
  dst.rate = src.rate;
  dst.packet_life_time_selector = src.packet_life_time_selector;
  dst.packet_life_time = src.packet_life_time;
  dst.preference = src.preference;
}

void copy_path_rec_to_kern(ib_user_path_rec& dst, const ibv_sa_path_rec& src) noexcept {
  std::memcpy(dst.dgid, src.dgid.raw, sizeof(dst.dgid));
  std::memcpy(dst.sgid, src.sgid.raw, sizeof(dst.sgid));
  dst.dlid = src.dlid;
  dst.slid = src.slid;
  dst.raw_traffic = static_cast<__u32>(src.raw_traffic);
  dst.flow_label = src.flow_label;
  dst.reversible = static_cast<__u32>(src.reversible);
  dst.mtu = src.mtu;
  dst.pkey = src.pkey;
  dst.hop_limit = src.hop_limit;
  dst.traffic_class = src.traffic_class;
  dst.numb_path = src.numb_path;
  dst.sl = src.sl;
  dst.mtu_selector = src.mtu_selector;
  dst.rate_selector = src.rate_selector;
  dst.rate = src.rate;
  dst.packet_life_time_selector = src.packet_life_time_selector;
  dst.packet_life_time = src.packet_life_time;
  dst.preference = src.preference;
}

}  // namespace softrdma
