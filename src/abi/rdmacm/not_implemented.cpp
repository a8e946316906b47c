// Entry points of librdmacm.so.1 that softrdma does not implement yet, and
// rdma_event_str. Each fails the documented way without touching its
// arguments: ECE (enhanced connection establishment, a vendor option
// exchange) with EOPNOTSUPP, which is what rdma-core reports for a device
// without ECE. docs/abi.md lists them.
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

namespace {

int NotImplemented(int err) noexcept {
  errno = err;
  return -1;
}

}  // namespace

extern "C" {

// ---- rdma_event_str (final: the strings rdma-core 44 returns)
SOFTRDMA_EXPORT const char* rdma_event_str(enum rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";  // Any other value, as rdma-core.
}

// ---- rdma_get_remote_ece
SOFTRDMA_EXPORT int rdma_get_remote_ece(struct rdma_cm_id* /*id*/, struct ibv_ece* /*ece*/) {
  return NotImplemented(EOPNOTSUPP);
}

// ---- rdma_reject_ece
SOFTRDMA_EXPORT int rdma_reject_ece(struct rdma_cm_id* /*id*/, const void* /*private_data*/,
                                    uint8_t /*private_data_len*/) {
  return NotImplemented(EOPNOTSUPP);
}

// ---- rdma_set_local_ece
SOFTRDMA_EXPORT int rdma_set_local_ece(struct rdma_cm_id* /*id*/, struct ibv_ece* /*ece*/) {
  return NotImplemented(EOPNOTSUPP);
}

}  // extern "C"
