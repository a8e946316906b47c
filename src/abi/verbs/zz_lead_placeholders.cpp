// THROW-AWAY FILE: delete when merging the lead's implementation.
//
// Stand-ins for the 38 entry points the core implements in other files of
// src/abi/verbs/, so that libibverbs.so.1 links (-z defs) and the export
// checks run on this branch. Each fails the documented way: NULL + errno,
// -1 + errno, an errno value, or nothing for void functions.
//
// They are plain extern "C" definitions on purpose: that is all the lead's
// definitions need too. The version script (libibverbs.map) gives every plain
// name its default version, e.g. ibv_open_device@@IBVERBS_1.1; the
// ibv_open_device@IBVERBS_1.0 compat twin comes from compat_1_0.cpp.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

// verbs.h redirects these four names to inline wrappers; the exported
// functions behind the wrappers have the plain names.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

template <typename T>
T* fail_null(int err = EOPNOTSUPP) noexcept {
  errno = err;
  return nullptr;
}

int fail_errno() noexcept {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

int fail_minus_one() noexcept {
  errno = EOPNOTSUPP;
  return -1;
}

}  // namespace

extern "C" {

// Devices and contexts. With no device at all rdma-core answers NULL/ENOSYS.
SOFTRDMA_EXPORT struct ibv_device** ibv_get_device_list(int* num_devices) {
  if (num_devices != nullptr) *num_devices = 0;
  return fail_null<ibv_device*>(ENOSYS);
}
SOFTRDMA_EXPORT void ibv_free_device_list(struct ibv_device** /*list*/) {}
SOFTRDMA_EXPORT const char* ibv_get_device_name(struct ibv_device* /*device*/) {
  return fail_null<const char>();
}
SOFTRDMA_EXPORT __be64 ibv_get_device_guid(struct ibv_device* /*device*/) {
  errno = EOPNOTSUPP;
  return 0;
}
SOFTRDMA_EXPORT int ibv_get_device_index(struct ibv_device* /*device*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT struct ibv_context* ibv_open_device(struct ibv_device* /*device*/) {
  return fail_null<ibv_context>();
}
SOFTRDMA_EXPORT int ibv_close_device(struct ibv_context* /*context*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_query_device(struct ibv_context* /*context*/,
                                     struct ibv_device_attr* /*device_attr*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_query_port(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                   struct _compat_ibv_port_attr* /*port_attr*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_query_gid(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                  int /*index*/, union ibv_gid* /*gid*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT int ibv_query_pkey(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                   int /*index*/, __be16* /*pkey*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT int ibv_get_pkey_index(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                       __be16 /*pkey*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT int _ibv_query_gid_ex(struct ibv_context* /*context*/, uint32_t /*port_num*/,
                                      uint32_t /*gid_index*/, struct ibv_gid_entry* /*entry*/,
                                      uint32_t /*flags*/, size_t /*entry_size*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context* /*context*/,
                                             struct ibv_gid_entry* /*entries*/,
                                             size_t /*max_entries*/, uint32_t /*flags*/,
                                             size_t /*entry_size*/) {
  errno = EOPNOTSUPP;
  return -EOPNOTSUPP;
}
// IBVERBS_PRIVATE_34; the last argument is rdma-core's enum ibv_gid_type_sysfs.
SOFTRDMA_EXPORT int ibv_query_gid_type(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                       unsigned int /*index*/, int* /*type*/) {
  return fail_minus_one();
}

// Protection domains and memory regions.
SOFTRDMA_EXPORT struct ibv_pd* ibv_alloc_pd(struct ibv_context* /*context*/) {
  return fail_null<ibv_pd>();
}
SOFTRDMA_EXPORT int ibv_dealloc_pd(struct ibv_pd* /*pd*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT struct ibv_mr* ibv_reg_mr(struct ibv_pd* /*pd*/, void* /*addr*/, size_t /*length*/,
                                          int /*access*/) {
  return fail_null<ibv_mr>();
}
SOFTRDMA_EXPORT struct ibv_mr* ibv_reg_mr_iova(struct ibv_pd* /*pd*/, void* /*addr*/,
                                               size_t /*length*/, uint64_t /*iova*/,
                                               int /*access*/) {
  return fail_null<ibv_mr>();
}
SOFTRDMA_EXPORT struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* /*pd*/, void* /*addr*/,
                                                size_t /*length*/, uint64_t /*iova*/,
                                                unsigned int /*access*/) {
  return fail_null<ibv_mr>();
}
SOFTRDMA_EXPORT int ibv_dereg_mr(struct ibv_mr* /*mr*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_rereg_mr(struct ibv_mr* /*mr*/, int /*flags*/, struct ibv_pd* /*pd*/,
                                 void* /*addr*/, size_t /*length*/, int /*access*/) {
  return fail_errno();
}

// Completion channels and queues.
SOFTRDMA_EXPORT struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* /*context*/) {
  return fail_null<ibv_comp_channel>();
}
SOFTRDMA_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel* /*channel*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT struct ibv_cq* ibv_create_cq(struct ibv_context* /*context*/, int /*cqe*/,
                                             void* /*cq_context*/,
                                             struct ibv_comp_channel* /*channel*/,
                                             int /*comp_vector*/) {
  return fail_null<ibv_cq>();
}
SOFTRDMA_EXPORT int ibv_destroy_cq(struct ibv_cq* /*cq*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_resize_cq(struct ibv_cq* /*cq*/, int /*cqe*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_get_cq_event(struct ibv_comp_channel* /*channel*/, struct ibv_cq** /*cq*/,
                                     void** /*cq_context*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT void ibv_ack_cq_events(struct ibv_cq* /*cq*/, unsigned int /*nevents*/) {}

// Queue pairs.
SOFTRDMA_EXPORT struct ibv_qp* ibv_create_qp(struct ibv_pd* /*pd*/,
                                             struct ibv_qp_init_attr* /*qp_init_attr*/) {
  return fail_null<ibv_qp>();
}
SOFTRDMA_EXPORT int ibv_modify_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/,
                                  int /*attr_mask*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_query_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/,
                                 int /*attr_mask*/, struct ibv_qp_init_attr* /*init_attr*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT int ibv_destroy_qp(struct ibv_qp* /*qp*/) {
  return fail_errno();
}
SOFTRDMA_EXPORT struct ibv_qp_ex* ibv_qp_to_qp_ex(struct ibv_qp* /*qp*/) {
  return fail_null<ibv_qp_ex>();
}

// Async events.
SOFTRDMA_EXPORT int ibv_get_async_event(struct ibv_context* /*context*/,
                                        struct ibv_async_event* /*event*/) {
  return fail_minus_one();
}
SOFTRDMA_EXPORT void ibv_ack_async_event(struct ibv_async_event* /*event*/) {}

// fork() support.
SOFTRDMA_EXPORT int ibv_fork_init(void) {
  return fail_errno();
}
SOFTRDMA_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_DISABLED;
}

}  // extern "C"
