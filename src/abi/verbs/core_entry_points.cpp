// The exported rdma-core entry points implemented by the core (src/core).
// Each is a plain forward: no logic here (see src/core/verbs.h).
#include <cerrno>
#include <cstring>

#include <infiniband/verbs.h>

#include "core/verbs.h"

// verbs.h turns these names into inline wrappers; the exported symbols are
// the real functions underneath.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define SOFTRDMA_EXPORT extern "C" __attribute__((visibility("default")))

namespace v = softrdma::verbs;

SOFTRDMA_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  return v::GetDeviceList(num_devices);
}
SOFTRDMA_EXPORT void ibv_free_device_list(ibv_device** list) {
  v::FreeDeviceList(list);
}
SOFTRDMA_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return v::GetDeviceName(device);
}
SOFTRDMA_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  return v::GetDeviceGuid(device);
}
SOFTRDMA_EXPORT int ibv_get_device_index(ibv_device* device) {
  return v::GetDeviceIndex(device);
}
SOFTRDMA_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  return v::OpenDevice(device);
}
SOFTRDMA_EXPORT int ibv_close_device(ibv_context* context) {
  return v::CloseDevice(context);
}
SOFTRDMA_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  return v::QueryDevice(context, attr);
}
// The exported ibv_query_port takes rdma-core's older 48-byte port
// attribute struct (everything before port_cap_flags2): never write more.
SOFTRDMA_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                                   _compat_ibv_port_attr* attr) {
  return v::QueryPort(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                      offsetof(ibv_port_attr, port_cap_flags2));
}
SOFTRDMA_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  return v::QueryGid(context, port_num, index, gid);
}
SOFTRDMA_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  return v::QueryGidEx(context, port_num, gid_index, entry, flags, entry_size);
}
SOFTRDMA_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                             size_t max_entries, uint32_t flags,
                                             size_t entry_size) {
  return v::QueryGidTable(context, entries, max_entries, flags, entry_size);
}
SOFTRDMA_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                       int* type) {
  return v::QueryGidType(context, port_num, index, type);
}
SOFTRDMA_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index,
                                   __be16* pkey) {
  return v::QueryPkey(context, port_num, index, pkey);
}
SOFTRDMA_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  return v::GetPkeyIndex(context, port_num, pkey);
}
SOFTRDMA_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return v::GetAsyncEvent(context, event);
}
SOFTRDMA_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  v::AckAsyncEvent(event);
}
SOFTRDMA_EXPORT int ibv_fork_init(void) {
  return v::ForkInit();
}
SOFTRDMA_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return v::IsForkInitialized();
}

SOFTRDMA_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  return v::AllocPd(context);
}
SOFTRDMA_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  return v::DeallocPd(pd);
}
SOFTRDMA_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return v::RegMr(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                  static_cast<unsigned>(access));
}
SOFTRDMA_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                        int access) {
  return v::RegMr(pd, addr, length, iova, static_cast<unsigned>(access));
}
SOFTRDMA_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                         unsigned int access) {
  return v::RegMr(pd, addr, length, iova, access);
}
SOFTRDMA_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  return v::DeregMr(mr);
}
SOFTRDMA_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length,
                                 int access) {
  return v::ReregMr(mr, flags, pd, addr, length, access);
}

// Sharing a context's PDs and MRs through its cmd_fd.
SOFTRDMA_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  return v::ImportDevice(cmd_fd);
}
SOFTRDMA_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  return v::ImportPd(context, pd_handle);
}
SOFTRDMA_EXPORT void ibv_unimport_pd(ibv_pd* pd) {
  v::UnimportPd(pd);
}
SOFTRDMA_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  return v::ImportMr(pd, mr_handle);
}
SOFTRDMA_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  v::UnimportMr(mr);
}

SOFTRDMA_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return v::CreateCompChannel(context);
}
SOFTRDMA_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  return v::DestroyCompChannel(channel);
}
SOFTRDMA_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                      ibv_comp_channel* channel, int comp_vector) {
  return v::CreateCq(context, cqe, cq_context, channel, comp_vector);
}
SOFTRDMA_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  return v::DestroyCq(cq);
}
SOFTRDMA_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  return v::ResizeCq(cq, cqe);
}
SOFTRDMA_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  return v::GetCqEvent(channel, cq, cq_context);
}
SOFTRDMA_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  v::AckCqEvents(cq, nevents);
}

SOFTRDMA_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  return v::CreateQp(pd, attr);
}
SOFTRDMA_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  return v::ModifyQp(qp, attr, attr_mask);
}
SOFTRDMA_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                                 ibv_qp_init_attr* init_attr) {
  return v::QueryQp(qp, attr, attr_mask, init_attr);
}
SOFTRDMA_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  return v::DestroyQp(qp);
}
SOFTRDMA_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return v::AttachMcast(qp, gid, lid);
}
SOFTRDMA_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return v::DetachMcast(qp, gid, lid);
}
SOFTRDMA_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  return v::QpToQpEx(qp);
}
