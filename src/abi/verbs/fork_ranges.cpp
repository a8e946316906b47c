// ibv_dontfork_range / ibv_dofork_range: rdma-core marks registered memory
// MADV_DONTFORK so a child's copy-on-write cannot move pages under the HCA's
// DMA. softrdma has no DMA: the "device" reads and writes through the
// process's own mappings, so there is nothing to protect and both succeed.
// libmlx5 imports them, which is why they must exist.
#include <cstddef>

#include "abi/verbs/symver.h"

extern "C" {

SOFTRDMA_EXPORT int ibv_dontfork_range(void* /*base*/, size_t /*size*/) {
  return 0;
}

SOFTRDMA_EXPORT int ibv_dofork_range(void* /*base*/, size_t /*size*/) {
  return 0;
}

}  // extern "C"
