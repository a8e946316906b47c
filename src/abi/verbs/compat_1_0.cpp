// The 33 "name@IBVERBS_1.0" compat entry points.
//
// rdma-core keeps them for binaries linked around 2006, whose structs
// (struct ibv_context_1_0 and friends) wrap the current ones. No binary on a
// current distribution imports them (docs/abi.md), and softrdma does not
// implement the 1.0 object model, so each fails: pointer results are NULL with
// errno = ENOSYS, verbs that return an errno return ENOSYS, verbs that return
// -1 do so with errno = ENOSYS, void ones do nothing. They must exist all the
// same: a loader refuses a binary that imports a missing symbol@version.
//
// Every function is named softrdma_compat_1_0_<name> and bound to
// <name>@IBVERBS_1.0 with .symver; the plain <name> (the @@IBVERBS_1.1
// default) is defined elsewhere. The parameters are opaque: the 1.0 structs
// are not declared anywhere we could include, and nothing here reads them.
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/verbs/symver.h"

namespace {

void* fail_null() noexcept {
  errno = ENOSYS;
  return nullptr;
}

int fail_errno() noexcept {
  errno = ENOSYS;
  return ENOSYS;
}

int fail_minus_one() noexcept {
  errno = ENOSYS;
  return -1;
}

}  // namespace

// Defines softrdma_compat_1_0_<name> and binds it to <name>@IBVERBS_1.0.
#define SOFTRDMA_COMPAT_1_0(ret, name, params, body)                                              \
  extern "C" SOFTRDMA_EXPORT ret softrdma_compat_1_0_##name params noexcept body SOFTRDMA_SYMVER( \
      softrdma_compat_1_0_##name, #name "@IBVERBS_1.0");

// Device discovery.
SOFTRDMA_COMPAT_1_0(void**, ibv_get_device_list, (int*),
                    { return static_cast<void**>(fail_null()); })
SOFTRDMA_COMPAT_1_0(void, ibv_free_device_list, (void**), {})
SOFTRDMA_COMPAT_1_0(const char*, ibv_get_device_name, (void*),
                    { return static_cast<const char*>(fail_null()); })
// The GUID is returned by value; 0 is not a valid GUID, so it marks failure.
SOFTRDMA_COMPAT_1_0(uint64_t, ibv_get_device_guid, (void*), {
  errno = ENOSYS;
  return 0;
})
SOFTRDMA_COMPAT_1_0(void*, ibv_open_device, (void*), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_close_device, (void*), { return fail_errno(); })

// Queries and async events.
SOFTRDMA_COMPAT_1_0(int, ibv_query_device, (void*, void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_query_port, (void*, uint8_t, void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_query_gid, (void*, uint8_t, int, void*), { return fail_minus_one(); })
SOFTRDMA_COMPAT_1_0(int, ibv_query_pkey, (void*, uint8_t, int, uint16_t*),
                    { return fail_minus_one(); })
SOFTRDMA_COMPAT_1_0(int, ibv_get_async_event, (void*, void*), { return fail_minus_one(); })
SOFTRDMA_COMPAT_1_0(void, ibv_ack_async_event, (void*), {})

// Protection domains and memory regions.
SOFTRDMA_COMPAT_1_0(void*, ibv_alloc_pd, (void*), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_dealloc_pd, (void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(void*, ibv_reg_mr, (void*, void*, std::size_t, int), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_dereg_mr, (void*), { return fail_errno(); })

// Completion queues.
SOFTRDMA_COMPAT_1_0(void*, ibv_create_cq, (void*, int, void*, void*, int), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_resize_cq, (void*, int), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_destroy_cq, (void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_get_cq_event, (void*, void**, void**), { return fail_minus_one(); })
SOFTRDMA_COMPAT_1_0(void, ibv_ack_cq_events, (void*, unsigned int), {})

// Shared receive queues.
SOFTRDMA_COMPAT_1_0(void*, ibv_create_srq, (void*, void*), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_modify_srq, (void*, void*, int), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_query_srq, (void*, void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_destroy_srq, (void*), { return fail_errno(); })

// Queue pairs.
SOFTRDMA_COMPAT_1_0(void*, ibv_create_qp, (void*, void*), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_query_qp, (void*, void*, int, void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_modify_qp, (void*, void*, int), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_destroy_qp, (void*), { return fail_errno(); })

// Address handles and multicast.
SOFTRDMA_COMPAT_1_0(void*, ibv_create_ah, (void*, void*), { return fail_null(); })
SOFTRDMA_COMPAT_1_0(int, ibv_destroy_ah, (void*), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_attach_mcast, (void*, void*, uint16_t), { return fail_errno(); })
SOFTRDMA_COMPAT_1_0(int, ibv_detach_mcast, (void*, void*, uint16_t), { return fail_errno(); })
