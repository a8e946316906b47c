// Helpers shared by the unit tests that drive a whole engine in this process
// (deferred ACKs, the RoCE transport, QP1 over RoCE).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "core/verbs.h"
#include "host/registry.h"
#include "wire/shm/shm_region.h"

namespace softrdma::testing {

// The index of the loopback GID (::ffff:127.0.0.1) on port 1, or -1.
inline int LoopbackGid(ibv_context* ctx) {
  static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  for (int i = 0; i < 16; ++i) {
    ibv_gid g{};
    if (verbs::QueryGid(ctx, 1, i, &g) == 0 && memcmp(g.raw, lo, 16) == 0) return i;
  }
  return -1;
}

// A shared-memory namespace of this test process's own (ut<pid>), so that
// the engine neither attaches to the user's default registry nor meets
// another test's; set it before the engine's first use.
inline void UseOwnNamespace() {
  setenv("SOFTRDMA_NAMESPACE", ("ut" + std::to_string(getpid())).c_str(), 1);
}
// Removes that namespace's registry, which the engine leaves for others.
inline void RemoveOwnRegistry() {
  shm::ShmRegion::Unlink(Registry::RegistryName());
}

}  // namespace softrdma::testing
