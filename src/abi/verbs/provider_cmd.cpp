// The provider-side part of IBVERBS_PRIVATE_34: ibv_cmd_* (a provider's way to
// issue uverbs commands to the kernel), the ioctl framework and the
// context/CQ setup helpers.
//
// Only a vendor provider calls these, from inside the verbs it implements
// for its own kernel device. softrdma never loads providers, so in practice
// they are reached only if a vendor library is handed an object it mistakes
// for its own. They fail safely and never touch their arguments: int results
// are EOPNOTSUPP (the ibv_cmd_* functions report errors as errno values) with
// errno set as well, pointer results NULL with errno = EOPNOTSUPP, and the
// void setup helpers do nothing.
//
// rdma-core declares these in its private driver.h, which is not installed.
// The prototypes below follow its argument lists with rdma-core-internal
// types left incomplete and kernel command/response buffers as void*; the
// dynamic linker matches names only, the return types are what matter.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

// rdma-core-internal types, only ever seen through pointers.
struct ibv_command_buffer;
struct verbs_context;
struct verbs_context_ops;
struct verbs_counters;
struct verbs_cq;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_xrcd;

namespace {

int not_supported() noexcept {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

// Defines an exported int ibv_cmd_* function that fails with EOPNOTSUPP.
#define SOFTRDMA_UNSUPPORTED_CMD(name, params) \
  extern "C" SOFTRDMA_EXPORT int name params { \
    return not_supported();                    \
  }

// Device and context.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_get_context,
                         (verbs_context*, void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_context, (ibv_context*, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_device_any,
                         (ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*,
                          size_t, void* /*resp*/, size_t* /*resp_size*/))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_port,
                         (ibv_context*, uint8_t, ibv_port_attr*, void* /*cmd*/, size_t))

// Protection domains, XRC domains, memory regions and windows.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_alloc_pd,
                         (ibv_context*, ibv_pd*, void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_dealloc_pd, (ibv_pd*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_open_xrcd, (ibv_context*, verbs_xrcd*, int, ibv_xrcd_init_attr*,
                                             void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_close_xrcd, (verbs_xrcd*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_reg_mr, (ibv_pd*, void*, size_t, uint64_t, int, verbs_mr*,
                                          void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_rereg_mr, (verbs_mr*, uint32_t, void*, size_t, uint64_t, int,
                                            ibv_pd*, void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_dereg_mr, (verbs_mr*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_mr, (ibv_pd*, verbs_mr*, uint32_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_advise_mr,
                         (ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_reg_dmabuf_mr,
                         (ibv_pd*, uint64_t, size_t, uint64_t, int, int, verbs_mr*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_alloc_mw, (ibv_pd*, ibv_mw_type, ibv_mw*, void* /*cmd*/, size_t,
                                            void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_dealloc_mw, (ibv_mw*))

// Completion queues.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_cq, (ibv_context*, int, ibv_comp_channel*, int, ibv_cq*,
                                             void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_cq_ex,
                         (ibv_context*, const ibv_cq_init_attr_ex*, verbs_cq*, void* /*cmd*/,
                          size_t, void* /*resp*/, size_t, uint32_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_poll_cq, (ibv_cq*, int, ibv_wc*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_req_notify_cq, (ibv_cq*, int))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_resize_cq,
                         (ibv_cq*, int, void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_cq, (ibv_cq*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_cq, (ibv_cq*, ibv_modify_cq_attr*, void* /*cmd*/, size_t))

// Shared receive queues.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_srq, (ibv_pd*, ibv_srq*, ibv_srq_init_attr*, void* /*cmd*/,
                                              size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_srq_ex, (ibv_context*, verbs_srq*, ibv_srq_init_attr_ex*,
                                                 void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_srq, (ibv_srq*, ibv_srq_attr*, int, void* /*cmd*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_srq, (ibv_srq*, ibv_srq_attr*, void* /*cmd*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_srq, (ibv_srq*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_post_srq_recv, (ibv_srq*, ibv_recv_wr*, ibv_recv_wr**))

// Queue pairs.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_qp, (ibv_pd*, ibv_qp*, ibv_qp_init_attr*, void* /*cmd*/,
                                             size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_qp_ex, (ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*,
                                                void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_qp_ex2, (ibv_context*, verbs_qp*, ibv_qp_init_attr_ex*,
                                                 void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_open_qp, (ibv_context*, verbs_qp*, int, ibv_qp_open_attr*,
                                           void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_query_qp,
                         (ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*, void* /*cmd*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_qp, (ibv_qp*, ibv_qp_attr*, int, void* /*cmd*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_qp_ex, (ibv_qp*, ibv_qp_attr*, int, void* /*cmd*/, size_t,
                                                void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_qp, (ibv_qp*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_post_send, (ibv_qp*, ibv_send_wr*, ibv_send_wr**))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_post_recv, (ibv_qp*, ibv_recv_wr*, ibv_recv_wr**))

// Address handles and multicast.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_ah,
                         (ibv_pd*, ibv_ah*, ibv_ah_attr*, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_ah, (ibv_ah*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_attach_mcast, (ibv_qp*, const ibv_gid*, uint16_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_detach_mcast, (ibv_qp*, const ibv_gid*, uint16_t))

// Flow steering, flow actions, work queues and RSS indirection tables.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_flow, (ibv_qp*, ibv_flow*, ibv_flow_attr*, void*, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_flow, (ibv_flow*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_flow_action_esp, (ibv_context*, ibv_flow_action_esp_attr*,
                                                          verbs_flow_action*, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_flow_action_esp,
                         (verbs_flow_action*, ibv_flow_action_esp_attr*, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_flow_action, (verbs_flow_action*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_wq, (ibv_context*, ibv_wq_init_attr*, ibv_wq*,
                                             void* /*cmd*/, size_t, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_modify_wq, (ibv_wq*, ibv_wq_attr*, void* /*cmd*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_wq, (ibv_wq*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_rwq_ind_table, (ibv_context*, ibv_rwq_ind_table_init_attr*,
                                                        ibv_rwq_ind_table*, void* /*resp*/, size_t))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_rwq_ind_table, (ibv_rwq_ind_table*))

// Counters and device memory.
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_create_counters, (ibv_context*, ibv_counters_init_attr*,
                                                   verbs_counters*, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_destroy_counters, (verbs_counters*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_read_counters,
                         (verbs_counters*, uint64_t*, uint32_t, uint32_t, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_alloc_dm,
                         (ibv_context*, const ibv_alloc_dm_attr*, verbs_dm*, ibv_command_buffer*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_free_dm, (verbs_dm*))
SOFTRDMA_UNSUPPORTED_CMD(ibv_cmd_reg_dm_mr, (ibv_pd*, verbs_dm*, uint64_t, size_t, unsigned int,
                                             verbs_mr*, ibv_command_buffer*))

// The ioctl() command framework.
SOFTRDMA_UNSUPPORTED_CMD(execute_ioctl, (ibv_context*, ibv_command_buffer*))

extern "C" {

// Sizes a provider's on-stack attribute array. Answering with the caller's
// own count is the harmless choice: the buffer is never submitted anyway,
// because execute_ioctl fails.
SOFTRDMA_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
                                                     ibv_command_buffer* /*link*/) {
  return num_attrs;
}

// Context and CQ setup used by a provider's open/create paths.
SOFTRDMA_EXPORT void* _verbs_init_and_alloc_context(ibv_device* /*device*/, int /*cmd_fd*/,
                                                    size_t /*alloc_size*/,
                                                    verbs_context* /*context_offset*/,
                                                    uint32_t /*driver_id*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SOFTRDMA_EXPORT ibv_context* verbs_open_device(ibv_device* /*device*/, void* /*private_data*/) {
  errno = EOPNOTSUPP;
  return nullptr;
}

SOFTRDMA_EXPORT void verbs_uninit_context(verbs_context* /*context*/) {}

SOFTRDMA_EXPORT void verbs_set_ops(verbs_context* /*vctx*/, const verbs_context_ops* /*ops*/) {}

SOFTRDMA_EXPORT void verbs_init_cq(ibv_cq* /*cq*/, ibv_context* /*context*/,
                                   ibv_comp_channel* /*channel*/, void* /*cq_context*/) {}

}  // extern "C"
