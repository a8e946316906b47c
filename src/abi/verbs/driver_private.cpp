// Provider registration and the exported verbs_allow_disassociate_destroy.
//
// Vendor provider libraries (libmlx5.so.1, libefa.so.1) are DT_NEEDED by
// perftest, UCX, libfabric and pyverbs, so they get loaded into processes that
// use softrdma's libibverbs, and their ELF constructors register themselves
// with us. softrdma serves its own software device and never loads or drives
// providers, so registration is accepted and ignored; returning without side
// effects is all those constructors need.
#include <cstdlib>

#include "abi/verbs/symver.h"
#include "util/verbs_env.h"

struct verbs_device_ops;
struct verbs_device;

extern "C" {

// rdma-core 44's registration call (PABI 34), made from provider constructors.
SOFTRDMA_EXPORT void verbs_register_driver_34(const struct verbs_device_ops* /*ops*/) {}

// The pre-2017 registration call. It only exists as ibv_register_driver@IBVERBS_1.1
// (no default version), so old providers still load but nothing new links to it.
using softrdma_legacy_driver_init = struct verbs_device* (*)(const char*, int);
SOFTRDMA_EXPORT void softrdma_ibv_register_driver_1_1(const char* /*name*/,
                                                      softrdma_legacy_driver_init /*init*/) {}
SOFTRDMA_SYMVER(softrdma_ibv_register_driver_1_1, "ibv_register_driver@IBVERBS_1.1");

// A 1-byte data object, not a function: providers read it to decide whether
// destroying objects of a disassociated (hot-unplugged) device may succeed.
SOFTRDMA_EXPORT bool verbs_allow_disassociate_destroy = false;

}  // extern "C"

namespace {

// Set at load time: providers may read the flag from their own constructors
// or at any later point, and ours runs first because they depend on us.
__attribute__((constructor)) void init_allow_disassociate_destroy() {
  verbs_allow_disassociate_destroy = softrdma::allow_disassociate_destroy(
      std::getenv("RDMAV_ALLOW_DISASSOC_DESTROY"), std::getenv("MLX4_DEVICE_FATAL_CLEANUP"));
}

}  // namespace
