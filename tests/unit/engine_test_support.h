// Helpers shared by the unit tests that drive a whole engine in this process
// (deferred ACKs, the RoCE transport, QP1 over RoCE).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "core/verbs.h"
#include "dead_test_segments.h"
#include "host/registry.h"
#include "wire/shm/shm_region.h"

namespace softrdma::testing {

// The index of the loopback GID (::ffff:127.0.0.1) on port 1, or -1.
inline int LoopbackGid(ibv_context* ctx) {
  static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  for (int i = 0; i < 16; ++i) {
    ibv_gid g{};
    if (verbs::QueryGid(ctx, 1, i, &g) == 0 && memcmp(g.raw, lo, 16) == 0) return i;
  }
  return -1;
}

// The first device, opened (nullptr: there is none, or it does not open).
inline ibv_context* OpenFirstDevice() {
  int n = 0;
  ibv_device** list = verbs::GetDeviceList(&n);
  if (!list) return nullptr;
  ibv_context* ctx = n > 0 ? verbs::OpenDevice(list[0]) : nullptr;
  verbs::FreeDeviceList(list);
  return ctx;
}

// What an RC (or UC) QP of a unit test is given on its way to RTS.
struct RcConnectParams {
  ibv_qp_type type = IBV_QPT_RC;  // UC: without the attributes only RC has
  ibv_mtu mtu = IBV_MTU_1024;
  uint32_t psn = 0;           // both rq_psn (RTR) and sq_psn (RTS)
  int access = 0;             // qp_access_flags at INIT
  uint8_t max_rd_atomic = 1;  // both max_dest_rd_atomic (RTR) and max_rd_atomic (RTS)
  uint8_t min_rnr_timer = 1;
  uint8_t timeout = 17;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

// INIT -> RTR -> RTS towards `dest` (a QP of this host) over the GID at
// `gid`; returns ModifyQp's first failure, else 0.
inline int ConnectRcOverGid(ibv_context* ctx, int gid, ibv_qp* qp, uint32_t dest,
                            const RcConnectParams& p) {
  const bool rc = p.type == IBV_QPT_RC;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = static_cast<unsigned>(p.access);
  if (int err = verbs::ModifyQp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return err;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = dest;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = p.max_rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid);
  verbs::QueryGid(ctx, 1, gid, &a.ah_attr.grh.dgid);
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int err = verbs::ModifyQp(qp, &a, mask)) return err;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = p.psn;
  a.timeout = p.timeout;
  a.retry_cnt = p.retry_cnt;
  a.rnr_retry = p.rnr_retry;
  a.max_rd_atomic = p.max_rd_atomic;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return verbs::ModifyQp(qp, &a, mask);
}

// Posts one signaled SEND of `sge` on `qp`; PostSend's result.
inline int PostSignaledSend(ibv_qp* qp, ibv_sge* sge, uint64_t wr_id = 0) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return verbs::PostSend(qp, &wr, &bad);
}

// A shared-memory namespace of this test process's own (ut<pid>), so that
// the engine neither attaches to the user's default registry nor meets
// another test's; set it before the engine's first use.
inline void UseOwnNamespace() {
  RemoveSegmentsOfDeadTestProcesses();  // killed test processes' leftovers
  setenv("SOFTRDMA_NAMESPACE", ("ut" + std::to_string(getpid())).c_str(), 1);
}
// Removes that namespace's registry, which the engine leaves for others.
inline void RemoveOwnRegistry() {
  shm::ShmRegion::Unlink(Registry::RegistryName());
}

}  // namespace softrdma::testing
