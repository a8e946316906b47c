// QP1 (the GSI) on the RoCE wire: the CM's MADs to and from other hosts.
// A UD SEND to QPN 1 at another host's GID leaves as one UD SEND_ONLY packet
// (DETH: the GSI Q_Key, the sending QP); a UD packet for QPN 1 that reaches
// this process goes to the GSI forwarder (host/gsi_forwarder.h), which hands
// it to the CM socket of the process it is for, or answers "nobody listens"
// through SendGsiPacket. See docs/design.md, "Other hosts: CM messages
// through QP1".
#pragma once

#include <cstdint>
#include <span>

#include "host/gsi_forwarder.h"
#include "transport/engine.h"
#include "wire/roce/packet.h"

namespace softrdma::transport::roce {

// Sends `datagram.payload` to QP1 at datagram.remote_gid from
// datagram.local_gid, DETH source QP `src_qpn` and Q_Key datagram.qkey.
// false: no packet port, or it refused the packet (lost, as on a network).
bool SendGsiPacket(Engine& engine, const GsiDatagram& datagram, uint32_t src_qpn);

// A received UD packet whose BTH destination QP is 1 (codec and ICRC checked;
// `net` holds its addresses).
void OnGsiPacket(Engine& engine, const softrdma::roce::PacketView& view,
                 const softrdma::roce::NetworkHeaders& net);

}  // namespace softrdma::transport::roce
