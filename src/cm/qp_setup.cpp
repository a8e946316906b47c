#include "cm/qp_setup.h"

#include <cerrno>
#include <cstring>

#include "cm/service.h"

namespace softrdma::cm {
namespace {

bool IsDatagram(const IdPrivate* id) {
  return id->id.qp_type == IBV_QPT_UD;
}

int ModifyTo(IdPrivate* id, ibv_qp_state state) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (InitQpAttr(id, &attr, &mask) != 0) return errno;
  return ibv_modify_qp(id->id.qp, &attr, mask);
}

}  // namespace

void BuildAhAttr(IdPrivate* id, ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->is_global = 1;
  std::memcpy(ah_attr->grh.dgid.raw, id->remote_gid.data(), 16);
  ah_attr->grh.sgid_index = uint8_t(id->gid_index < 0 ? 0 : id->gid_index);
  ah_attr->grh.hop_limit = id->path.hop_limit != 0 ? id->path.hop_limit : 64;
  ah_attr->grh.traffic_class = id->tos;
  ah_attr->grh.flow_label = 0;
  ah_attr->port_num = 1;
}

int InitQpAttr(IdPrivate* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (qp_attr == nullptr || qp_attr_mask == nullptr || id->id.verbs == nullptr) {
    errno = EINVAL;
    return -1;
  }
  ibv_qp_state state = qp_attr->qp_state;
  *qp_attr_mask = IBV_QP_STATE;
  switch (state) {
    case IBV_QPS_INIT:
      qp_attr->pkey_index = 0;
      qp_attr->port_num = 1;
      *qp_attr_mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (IsDatagram(id)) {
        qp_attr->qkey = id->qkey != 0 ? id->qkey : RDMA_UDP_QKEY;
        *qp_attr_mask |= IBV_QP_QKEY;
      } else {
        // ib-cm.md §4: remote write always; read and atomic when the QP
        // accepts incoming READ/ATOMIC (responder resources > 0).
        qp_attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (id->responder_resources > 0) {
          qp_attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        }
        *qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (IsDatagram(id)) return 0;
      if (id->remote_qpn == 0) break;  // the peer is not known yet
      BuildAhAttr(id, &qp_attr->ah_attr);
      qp_attr->path_mtu = ibv_mtu(id->path_mtu);
      qp_attr->dest_qp_num = id->remote_qpn;
      qp_attr->rq_psn = id->rq_psn;
      *qp_attr_mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      // XRC QPs get RC's attributes: the verbs drop what an initiator or a
      // target has no use for (docs/design.md, "XRC").
      if (id->id.qp_type != IBV_QPT_UC) {
        qp_attr->max_dest_rd_atomic = id->responder_resources;
        qp_attr->min_rnr_timer = 0;
        *qp_attr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      return 0;
    case IBV_QPS_RTS:
      qp_attr->sq_psn = id->sq_psn;
      *qp_attr_mask |= IBV_QP_SQ_PSN;
      if (id->id.qp_type != IBV_QPT_UC && !IsDatagram(id)) {
        if (id->remote_qpn == 0) break;
        qp_attr->timeout = id->local_ack_timeout;
        qp_attr->retry_cnt = id->retry_count;
        qp_attr->rnr_retry = id->rnr_retry_count;
        qp_attr->max_rd_atomic = id->initiator_depth;
        *qp_attr_mask |=
            IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      }
      return 0;
    default:
      break;
  }
  errno = EINVAL;
  return -1;
}

int PrepareNewQp(IdPrivate* id) {
  if (IsDatagram(id)) {
    // A UD QP needs nothing from the peer: ready to send at once.
    if (int rc = ModifyTo(id, IBV_QPS_INIT); rc != 0) return rc;
    if (int rc = ModifyTo(id, IBV_QPS_RTR); rc != 0) return rc;
    return ModifyTo(id, IBV_QPS_RTS);
  }
  // Receives may be posted before the connection exists: INIT now, with no
  // remote access until the responder resources are negotiated.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  attr.qp_access_flags = 0;
  return ibv_modify_qp(id->id.qp, &attr,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int ConnectQp(IdPrivate* id) {
  if (id->id.qp == nullptr) return 0;
  if (IsDatagram(id)) return 0;
  ibv_qp_attr current{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(id->id.qp, &current, IBV_QP_STATE, &init) == 0 &&
      current.qp_state == IBV_QPS_INIT) {
    if (int rc = ModifyTo(id, IBV_QPS_INIT); rc != 0) return rc;
  }
  if (int rc = ModifyTo(id, IBV_QPS_RTR); rc != 0) return rc;
  return ModifyTo(id, IBV_QPS_RTS);
}

void QpToError(IdPrivate* id) {
  if (id->id.qp == nullptr) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->id.qp, &attr, IBV_QP_STATE);
}

}  // namespace softrdma::cm
