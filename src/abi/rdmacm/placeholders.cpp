// TEMPORARY: placeholder definitions of the 41 rdma_* entry points of
// librdmacm.so.1, so that the library links and exports its full symbol set
// (tests/abi/check_exports.sh) while the real entry points are being written
// in cm_entry_points.cpp on top of the connection manager (src/cm/).
//
// Remove each block here when its function lands in cm_entry_points.cpp (a
// name defined twice does not link); delete the file when it is empty. The
// blocks are independent and sorted by name; the helpers are
// [[maybe_unused]] so any subset of the blocks builds.
//
// Every placeholder fails with ENOSYS the way its man page documents a
// failure, without touching its arguments (except rdma_get_devices, below):
//   - int results: -1, errno = ENOSYS;
//   - pointer results: NULL, errno = ENOSYS;
//   - rdma_get_src_port/rdma_get_dst_port: 0 (rdma-core's "no port"), errno = ENOSYS;
//   - void functions: nothing (no object can exist to be released).
// rdma_event_str is trivial and already final (rdma-core's strings).
// Prototypes are those of rdma/rdma_cma.h and rdma/rdma_verbs.h (the
// rdma_srq functions); the static inline helpers of rdma_verbs.h are not
// library symbols and are not defined here.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

namespace {

[[maybe_unused]] int placeholder_fail() noexcept {
  errno = ENOSYS;
  return -1;
}

template <typename T>
[[maybe_unused]] T* placeholder_fail_null() noexcept {
  errno = ENOSYS;
  return nullptr;
}

}  // namespace

extern "C" {

// ---- rdma_accept
SOFTRDMA_EXPORT int rdma_accept(struct rdma_cm_id* /*id*/, struct rdma_conn_param* /*conn_param*/) {
  return placeholder_fail();
}

// ---- rdma_ack_cm_event
SOFTRDMA_EXPORT int rdma_ack_cm_event(struct rdma_cm_event* /*event*/) {
  return placeholder_fail();
}

// ---- rdma_bind_addr
SOFTRDMA_EXPORT int rdma_bind_addr(struct rdma_cm_id* /*id*/, struct sockaddr* /*addr*/) {
  return placeholder_fail();
}

// ---- rdma_connect
SOFTRDMA_EXPORT int rdma_connect(struct rdma_cm_id* /*id*/,
                                 struct rdma_conn_param* /*conn_param*/) {
  return placeholder_fail();
}

// ---- rdma_create_ep
SOFTRDMA_EXPORT int rdma_create_ep(struct rdma_cm_id** /*id*/, struct rdma_addrinfo* /*res*/,
                                   struct ibv_pd* /*pd*/,
                                   struct ibv_qp_init_attr* /*qp_init_attr*/) {
  return placeholder_fail();
}

// ---- rdma_create_event_channel
SOFTRDMA_EXPORT struct rdma_event_channel* rdma_create_event_channel(void) {
  return placeholder_fail_null<rdma_event_channel>();
}

// ---- rdma_create_id
SOFTRDMA_EXPORT int rdma_create_id(struct rdma_event_channel* /*channel*/,
                                   struct rdma_cm_id** /*id*/, void* /*context*/,
                                   enum rdma_port_space /*ps*/) {
  return placeholder_fail();
}

// ---- rdma_create_qp
SOFTRDMA_EXPORT int rdma_create_qp(struct rdma_cm_id* /*id*/, struct ibv_pd* /*pd*/,
                                   struct ibv_qp_init_attr* /*qp_init_attr*/) {
  return placeholder_fail();
}

// ---- rdma_create_qp_ex
SOFTRDMA_EXPORT int rdma_create_qp_ex(struct rdma_cm_id* /*id*/,
                                      struct ibv_qp_init_attr_ex* /*qp_init_attr*/) {
  return placeholder_fail();
}

// ---- rdma_create_srq
SOFTRDMA_EXPORT int rdma_create_srq(struct rdma_cm_id* /*id*/, struct ibv_pd* /*pd*/,
                                    struct ibv_srq_init_attr* /*attr*/) {
  return placeholder_fail();
}

// ---- rdma_create_srq_ex
SOFTRDMA_EXPORT int rdma_create_srq_ex(struct rdma_cm_id* /*id*/,
                                       struct ibv_srq_init_attr_ex* /*attr*/) {
  return placeholder_fail();
}

// ---- rdma_destroy_ep
SOFTRDMA_EXPORT void rdma_destroy_ep(struct rdma_cm_id* /*id*/) {}

// ---- rdma_destroy_event_channel
SOFTRDMA_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel* /*channel*/) {}

// ---- rdma_destroy_id
SOFTRDMA_EXPORT int rdma_destroy_id(struct rdma_cm_id* /*id*/) {
  return placeholder_fail();
}

// ---- rdma_destroy_qp
SOFTRDMA_EXPORT void rdma_destroy_qp(struct rdma_cm_id* /*id*/) {}

// ---- rdma_destroy_srq
SOFTRDMA_EXPORT void rdma_destroy_srq(struct rdma_cm_id* /*id*/) {}

// ---- rdma_disconnect
SOFTRDMA_EXPORT int rdma_disconnect(struct rdma_cm_id* /*id*/) {
  return placeholder_fail();
}

// ---- rdma_establish
SOFTRDMA_EXPORT int rdma_establish(struct rdma_cm_id* /*id*/) {
  return placeholder_fail();
}

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

// ---- rdma_free_devices
SOFTRDMA_EXPORT void rdma_free_devices(struct ibv_context** /*list*/) {}

// ---- rdma_freeaddrinfo
SOFTRDMA_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo* /*res*/) {}

// ---- rdma_get_cm_event
SOFTRDMA_EXPORT int rdma_get_cm_event(struct rdma_event_channel* /*channel*/,
                                      struct rdma_cm_event** /*event*/) {
  return placeholder_fail();
}

// ---- rdma_get_devices
// Like rdma-core's on failure, reports 0 devices through num_devices when it
// is non-NULL (callers may read the count before checking the list).
SOFTRDMA_EXPORT struct ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices != nullptr) {
    *num_devices = 0;
  }
  return placeholder_fail_null<ibv_context*>();
}

// ---- rdma_get_dst_port
SOFTRDMA_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id* /*id*/) {
  errno = ENOSYS;
  return 0;
}

// ---- rdma_get_remote_ece
SOFTRDMA_EXPORT int rdma_get_remote_ece(struct rdma_cm_id* /*id*/, struct ibv_ece* /*ece*/) {
  return placeholder_fail();
}

// ---- rdma_get_request
SOFTRDMA_EXPORT int rdma_get_request(struct rdma_cm_id* /*listen*/, struct rdma_cm_id** /*id*/) {
  return placeholder_fail();
}

// ---- rdma_get_src_port
SOFTRDMA_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id* /*id*/) {
  errno = ENOSYS;
  return 0;
}

// ---- rdma_getaddrinfo
SOFTRDMA_EXPORT int rdma_getaddrinfo(const char* /*node*/, const char* /*service*/,
                                     const struct rdma_addrinfo* /*hints*/,
                                     struct rdma_addrinfo** /*res*/) {
  return placeholder_fail();
}

// ---- rdma_init_qp_attr
SOFTRDMA_EXPORT int rdma_init_qp_attr(struct rdma_cm_id* /*id*/, struct ibv_qp_attr* /*qp_attr*/,
                                      int* /*qp_attr_mask*/) {
  return placeholder_fail();
}

// ---- rdma_join_multicast
SOFTRDMA_EXPORT int rdma_join_multicast(struct rdma_cm_id* /*id*/, struct sockaddr* /*addr*/,
                                        void* /*context*/) {
  return placeholder_fail();
}

// ---- rdma_join_multicast_ex
SOFTRDMA_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id* /*id*/,
                                           struct rdma_cm_join_mc_attr_ex* /*mc_join_attr*/,
                                           void* /*context*/) {
  return placeholder_fail();
}

// ---- rdma_leave_multicast
SOFTRDMA_EXPORT int rdma_leave_multicast(struct rdma_cm_id* /*id*/, struct sockaddr* /*addr*/) {
  return placeholder_fail();
}

// ---- rdma_listen
SOFTRDMA_EXPORT int rdma_listen(struct rdma_cm_id* /*id*/, int /*backlog*/) {
  return placeholder_fail();
}

// ---- rdma_migrate_id
SOFTRDMA_EXPORT int rdma_migrate_id(struct rdma_cm_id* /*id*/,
                                    struct rdma_event_channel* /*channel*/) {
  return placeholder_fail();
}

// ---- rdma_notify
SOFTRDMA_EXPORT int rdma_notify(struct rdma_cm_id* /*id*/, enum ibv_event_type /*event*/) {
  return placeholder_fail();
}

// ---- rdma_reject
SOFTRDMA_EXPORT int rdma_reject(struct rdma_cm_id* /*id*/, const void* /*private_data*/,
                                uint8_t /*private_data_len*/) {
  return placeholder_fail();
}

// ---- rdma_reject_ece
SOFTRDMA_EXPORT int rdma_reject_ece(struct rdma_cm_id* /*id*/, const void* /*private_data*/,
                                    uint8_t /*private_data_len*/) {
  return placeholder_fail();
}

// ---- rdma_resolve_addr
SOFTRDMA_EXPORT int rdma_resolve_addr(struct rdma_cm_id* /*id*/, struct sockaddr* /*src_addr*/,
                                      struct sockaddr* /*dst_addr*/, int /*timeout_ms*/) {
  return placeholder_fail();
}

// ---- rdma_resolve_route
SOFTRDMA_EXPORT int rdma_resolve_route(struct rdma_cm_id* /*id*/, int /*timeout_ms*/) {
  return placeholder_fail();
}

// ---- rdma_set_local_ece
SOFTRDMA_EXPORT int rdma_set_local_ece(struct rdma_cm_id* /*id*/, struct ibv_ece* /*ece*/) {
  return placeholder_fail();
}

// ---- rdma_set_option
SOFTRDMA_EXPORT int rdma_set_option(struct rdma_cm_id* /*id*/, int /*level*/, int /*optname*/,
                                    void* /*optval*/, size_t /*optlen*/) {
  return placeholder_fail();
}

}  // extern "C"
