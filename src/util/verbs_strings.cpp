#include "util/verbs_strings.h"

namespace softrdma {

// Each function switches over the full enum without a default label, so that
// -Wswitch (part of -Wall, an error here) flags an enumerator added by a newer
// verbs.h; out-of-range values fall through to the fallback after the switch.

const char* wc_status_str(ibv_wc_status status) noexcept {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_LOC_LEN_ERR:
      return "local length error";
    case IBV_WC_LOC_QP_OP_ERR:
      return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR:
      return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_WR_FLUSH_ERR:
      return "work request flushed error";
    case IBV_WC_MW_BIND_ERR:
      return "memory window bind error";
    case IBV_WC_BAD_RESP_ERR:
      return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR:
      return "local access error";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_REM_OP_ERR:
      return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR:
      return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return "remote invalid RD request error";
    case IBV_WC_REM_ABORT_ERR:
      return "remote aborted error";
    case IBV_WC_INV_EECN_ERR:
      return "invalid EE context number error";
    case IBV_WC_INV_EEC_STATE_ERR:
      return "invalid EE context state error";
    case IBV_WC_FATAL_ERR:
      return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR:
      return "response timeout error";
    case IBV_WC_GENERAL_ERR:
      return "general error";
    case IBV_WC_TM_ERR:
      return "tag matching error";
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return "tag matching rendezvous incomplete";
  }
  return kUnknownEnumStr;
}

const char* event_type_str(ibv_event_type event) noexcept {
  switch (event) {
    case IBV_EVENT_CQ_ERR:
      return "CQ error";
    case IBV_EVENT_QP_FATAL:
      return "QP fatal error";
    case IBV_EVENT_QP_REQ_ERR:
      return "QP invalid request error";
    case IBV_EVENT_QP_ACCESS_ERR:
      return "QP access error";
    case IBV_EVENT_COMM_EST:
      return "communication established";
    case IBV_EVENT_SQ_DRAINED:
      return "send queue drained";
    case IBV_EVENT_PATH_MIG:
      return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR:
      return "path migration error";
    case IBV_EVENT_DEVICE_FATAL:
      return "device fatal error";
    case IBV_EVENT_PORT_ACTIVE:
      return "port active";
    case IBV_EVENT_PORT_ERR:
      return "port error";
    case IBV_EVENT_LID_CHANGE:
      return "LID changed";
    case IBV_EVENT_PKEY_CHANGE:
      return "P_Key table changed";
    case IBV_EVENT_SM_CHANGE:
      return "subnet manager changed";
    case IBV_EVENT_SRQ_ERR:
      return "SRQ error";
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return "QP last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER:
      return "client reregistration requested";
    case IBV_EVENT_GID_CHANGE:
      return "GID table changed";
    case IBV_EVENT_WQ_FATAL:
      return "WQ fatal error";
  }
  return kUnknownEnumStr;
}

const char* node_type_str(ibv_node_type node_type) noexcept {
  switch (node_type) {
    case IBV_NODE_UNKNOWN:
      break;  // an explicit "unknown" member: same text as out-of-range values
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP RNIC";
    case IBV_NODE_USNIC:
      return "usNIC";
    case IBV_NODE_USNIC_UDP:
      return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
      return "unspecified";
  }
  return kUnknownEnumStr;
}

const char* port_state_str(ibv_port_state port_state) noexcept {
  switch (port_state) {
    case IBV_PORT_NOP:
      return "no state change";
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    case IBV_PORT_ACTIVE:
      return "active";
    case IBV_PORT_ACTIVE_DEFER:
      return "active (deferred)";
  }
  return kUnknownEnumStr;
}

}  // namespace softrdma
