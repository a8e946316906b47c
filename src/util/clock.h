// Monotonic time in nanoseconds; the transport's timers (retransmit, RNR) run
// on it.
#pragma once

#include <cstdint>
#include <ctime>

namespace softrdma {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace softrdma
