#include "host/qpn_range.h"

namespace softrdma {

uint32_t QpnSlotFor(std::string_view ns, uid_t uid) {
  uint64_t h = 0;
  if (!ns.empty()) {
    h = 1469598103934665603ull;  // FNV-1a: stable across builds and hosts
    for (const char c : ns) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  }
  return static_cast<uint32_t>((h + uid) % kQpnSlots);
}

}  // namespace softrdma
