// Shared fixtures for the QP state-machine tests: an ibv_qp_attr whose every
// field holds a valid value, so that a test changes exactly one thing.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

#include "core/qp_state_machine.h"

namespace softrdma::test {

// GID table entries 0 and 1 populated, as for one interface with an IPv6
// link-local and an IPv4-mapped GID.
inline constexpr uint64_t kTwoGids = 0b11;
inline constexpr uint8_t kLocalGidIndex = 1;

inline ModifyContext TestContext() {
  ModifyContext ctx;
  ctx.valid_gid_mask = kTwoGids;
  ctx.port_max_mtu = IBV_MTU_4096;
  return ctx;
}

inline ibv_qp_attr GoodAttr(ibv_qp_state cur, ibv_qp_state next) {
  ibv_qp_attr a{};
  a.qp_state = next;
  a.cur_qp_state = cur;
  a.path_mtu = IBV_MTU_1024;
  a.path_mig_state = IBV_MIG_MIGRATED;
  a.qkey = 0x11111111;
  a.rq_psn = 0x123456;
  a.sq_psn = 0x654321;
  a.dest_qp_num = 0x42;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = kLocalGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.dgid.raw[10] = 0xff;  // ::ffff:10.0.0.2
  a.ah_attr.grh.dgid.raw[11] = 0xff;
  a.ah_attr.grh.dgid.raw[12] = 10;
  a.ah_attr.grh.dgid.raw[15] = 2;
  a.alt_ah_attr = a.ah_attr;
  a.pkey_index = 0;
  a.en_sqd_async_notify = 1;
  a.max_rd_atomic = 1;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.port_num = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.alt_port_num = 1;
  a.alt_timeout = 14;
  return a;
}

}  // namespace softrdma::test
