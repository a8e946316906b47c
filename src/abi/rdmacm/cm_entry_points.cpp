// The rdma_cm entry points of librdmacm.so.1: argument passing only; the
// semantics live in src/cm (api.h). No C++ exception crosses this boundary:
// the core reports failures through errno.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "abi/verbs/symver.h"
#include "cm/api.h"

namespace cm = softrdma::cm;

extern "C" {

SOFTRDMA_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  return cm::CreateEventChannel();
}
SOFTRDMA_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  cm::DestroyEventChannel(channel);
}
SOFTRDMA_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                   rdma_port_space ps) {
  return cm::CreateId(channel, id, context, ps);
}
SOFTRDMA_EXPORT int rdma_destroy_id(rdma_cm_id* id) {
  return cm::DestroyId(id);
}
SOFTRDMA_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  return cm::BindAddr(id, addr);
}
SOFTRDMA_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                                      int timeout_ms) {
  return cm::ResolveAddr(id, src_addr, dst_addr, timeout_ms);
}
SOFTRDMA_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  return cm::ResolveRoute(id, timeout_ms);
}
SOFTRDMA_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return cm::CreateQp(id, pd, qp_init_attr);
}
SOFTRDMA_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* qp_init_attr) {
  return cm::CreateQpEx(id, qp_init_attr);
}
SOFTRDMA_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
  cm::DestroyQp(id);
}
SOFTRDMA_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return cm::Connect(id, conn_param);
}
SOFTRDMA_EXPORT int rdma_establish(rdma_cm_id* id) {
  return cm::EstablishId(id);
}
SOFTRDMA_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
  return cm::Listen(id, backlog);
}
SOFTRDMA_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  return cm::GetRequest(listen, id);
}
SOFTRDMA_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  return cm::AcceptConnection(id, conn_param);
}
SOFTRDMA_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data,
                                uint8_t private_data_len) {
  return cm::RejectConnection(id, private_data, private_data_len);
}
SOFTRDMA_EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  return cm::Notify(id, event);
}
SOFTRDMA_EXPORT int rdma_disconnect(rdma_cm_id* id) {
  return cm::DisconnectId(id);
}
SOFTRDMA_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return cm::JoinMulticast(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}
SOFTRDMA_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr,
                                           void* context) {
  return cm::JoinMulticastEx(id, attr, context);
}
SOFTRDMA_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  return cm::LeaveMulticast(id, addr);
}
SOFTRDMA_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  return cm::GetCmEvent(channel, event);
}
SOFTRDMA_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  return cm::AckCmEvent(event);
}
SOFTRDMA_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
  return cm::GetSrcPort(id);
}
SOFTRDMA_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
  return cm::GetDstPort(id);
}
SOFTRDMA_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  return cm::GetDevices(num_devices);
}
SOFTRDMA_EXPORT void rdma_free_devices(ibv_context** list) {
  cm::FreeDevices(list);
}
SOFTRDMA_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval,
                                    size_t optlen) {
  return cm::SetOption(id, level, optname, optval, optlen);
}
SOFTRDMA_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  return cm::MigrateId(id, channel);
}
SOFTRDMA_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                     const rdma_addrinfo* hints, rdma_addrinfo** res) {
  return cm::GetAddrInfo(node, service, hints, res);
}
SOFTRDMA_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  cm::FreeAddrInfo(res);
}
SOFTRDMA_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                                   ibv_qp_init_attr* qp_init_attr) {
  return cm::CreateEp(id, res, pd, qp_init_attr);
}
SOFTRDMA_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  cm::DestroyEp(id);
}
SOFTRDMA_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  return cm::CreateSrq(id, pd, attr);
}
SOFTRDMA_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  return cm::CreateSrqEx(id, attr);
}
SOFTRDMA_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  cm::DestroySrq(id);
}
SOFTRDMA_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  return cm::InitQpAttr(id, qp_attr, qp_attr_mask);
}

}  // extern "C"
