// Both wires' rule for a responder that is a process of this host and had
// no CPU (ResponderNotScheduled in completer.cpp and roce_requester.cpp): a
// retransmit timer expiry it caused by not running does not use up a retry,
// as on a NIC, whose hardware answers whatever its host's CPU does. What
// tells "it runs" differs per wire (its ring's consumption, its looks at its
// RoCE port); the clock of how long it has not run, its bound and the check
// that the process is still alive are this one.
#pragma once

#include <cstdint>

#include "host/registry.h"

namespace softrdma {
class Engine;
}  // namespace softrdma

namespace softrdma::transport {

// How long a live local responder that shows no progress may keep a
// requester's retries from counting down: past it, a stopped process counts
// as unresponsive (a stopped process; 30 s is far beyond the half second a
// loaded host was seen to leave a process without a CPU).
inline constexpr uint64_t kMaxResponderStallNs = 30'000'000'000;

// Per requester QP: since when its responder shows no progress (0: it did at
// the last expiry), and the wire's progress count at the last expiry.
struct ResponderStallClock {
  uint64_t since_ns = 0;
  uint64_t mark = 0;
};

// At a retransmit timer expiry: `progress` is the wire's verdict (the
// responder's process ran since the previous expiry, or nothing of ours
// waits for it). Returns whether this expiry is the responder's CPU's: no
// progress, not for longer than kMaxResponderStallNs, and its process alive.
bool StalledButAlive(Engine& engine, ResponderStallClock& clock, ProcRef responder, bool progress,
                     uint64_t now);

}  // namespace softrdma::transport
