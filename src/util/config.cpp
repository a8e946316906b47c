#include "util/config.h"

#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "core/limits.h"

namespace softrdma {

namespace {

uint32_t ParseU32(const char* s, uint32_t fallback, uint32_t lo, uint32_t hi) {
  if (!s || !*s) return fallback;
  char* end = nullptr;
  unsigned long v = strtoul(s, &end, 0);
  if (*end || v < lo || v > hi) return fallback;
  return static_cast<uint32_t>(v);
}

bool IsPowerOfTwo(uint32_t v) {
  return v && !(v & (v - 1));
}

Config Load() {
  Config c;
  if (const char* ns = getenv("SOFTRDMA_NAMESPACE")) {
    // Keep the name usable as a shm object name: letters, digits, '-', '_', '.'.
    for (const char* p = ns; *p && c.shm_namespace.size() < 64; ++p) {
      char ch = *p;
      bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '-' || ch == '_' || ch == '.';
      c.shm_namespace.push_back(ok ? ch : '_');
    }
  }
  if (const char* cma = getenv("SOFTRDMA_CMA")) c.cma_allowed = strcmp(cma, "0") != 0;
  if (const char* map = getenv("SOFTRDMA_MAP_MR")) c.map_mr = strcmp(map, "0") != 0;
  // The inline limit is never below the largest inline send we accept, so an
  // inline WR always fits in one ring record.
  c.shm_inline_max = ParseU32(getenv("SOFTRDMA_SHM_INLINE_MAX"), c.shm_inline_max,
                              limits::kMaxInlineData, 64 * 1024);
  uint32_t slots = ParseU32(getenv("SOFTRDMA_RING_SLOTS"), c.ring_slots, 1024, 1u << 22);
  if (IsPowerOfTwo(slots)) c.ring_slots = slots;
  return c;
}

}  // namespace

std::string Config::ShmPrefix() const {
  std::string p = "/softrdma-";
  if (!shm_namespace.empty()) p += shm_namespace + "-";
  p += std::to_string(getuid());
  return p;
}

const Config& GetConfig() {
  // Never destroyed: the library still needs it in its exit handler, which
  // may run after function-local statics have been torn down.
  static const Config* config = new Config(Load());
  return *config;
}

}  // namespace softrdma
