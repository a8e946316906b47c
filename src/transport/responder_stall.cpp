#include "transport/responder_stall.h"

#include "transport/engine.h"

namespace softrdma::transport {

bool StalledButAlive(Engine& engine, ResponderStallClock& clock, ProcRef responder, bool progress,
                     uint64_t now) {
  if (progress) {
    clock.since_ns = 0;  // its silence is its QP's
    return false;
  }
  if (clock.since_ns == 0) clock.since_ns = now;
  if (now - clock.since_ns > kMaxResponderStallNs) return false;
  return engine.registry().LivePid(responder) != 0;
}

}  // namespace softrdma::transport
