// Run-time options, read once from the environment. Every option is
// documented in docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>

namespace softrdma {

struct Config {
  // SOFTRDMA_NAMESPACE: isolates all shared-memory objects of a group of
  // processes (tests use one per test). Empty = the per-user default.
  std::string shm_namespace;
  // SOFTRDMA_CMA=0 forbids cross-memory attach: bulk data then moves through
  // the ring in fragments (two copies), as where the kernel refuses CMA.
  bool cma_allowed = true;
  // SOFTRDMA_MAP_MR=0 keeps registered memory where it is: peers then reach
  // it with cross-memory attach (a system call per operation) or the ring.
  // By default ibv_reg_mr moves a region's whole pages into shared memory
  // that peers map, so a one-sided operation is a memcpy (core/memory_export.h).
  bool map_mr = true;
  // SOFTRDMA_SHM_INLINE_MAX: messages up to this many bytes travel inside the
  // ring; larger ones are pulled by the receiver with one copy.
  uint32_t shm_inline_max = 2048;
  // SOFTRDMA_RING_SLOTS: 64-byte slots in each process's inbound ring.
  uint32_t ring_slots = 1u << 16;

  // The shared-memory name prefix, e.g. "/softrdma-1000" or
  // "/softrdma-<namespace>-1000" (always per user).
  std::string ShmPrefix() const;
};

const Config& GetConfig();

}  // namespace softrdma
