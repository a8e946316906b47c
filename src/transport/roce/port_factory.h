// Where the engine gets the RoCE wire's packet port: the one place that
// names the implementation below the PacketPort seam (the UDP port of
// src/wire/roce, once it exists).
#pragma once

#include <memory>

#include "util/status.h"
#include "wire/roce/packet_port.h"

namespace softrdma::transport::roce {

// The port this process sends and receives RoCEv2 datagrams through, or
// nullptr with the reason in *err.
std::unique_ptr<softrdma::roce::PacketPort> OpenPacketPort(Status* err);

// At exit, with SOFTRDMA_LOG=info: the RoCE wire's counters of this process
// (packets, drops, retransmissions) and its port's forwarding counters (to
// other processes and registries), so a slow run can be told from a lossy one.
void LogCounters(softrdma::roce::PacketPort* port);

}  // namespace softrdma::transport::roce
