// The name of a CM peer on another host (or reached over the RoCE wire with
// SOFTRDMA_CM_GSI=1): where a peer of this host is named by its abstract
// socket ("softrdma-..."), a peer behind QP1 is named by the pair of
// addresses its messages travel between, "roce:<local GID hex>:<remote GID
// hex>". A MAD from it is answered from the local address to QP1 of the
// remote one, and a retransmitted request is recognised by it.
#pragma once

#include <string>

#include "cm/mad_codec.h"

namespace softrdma::cm {

std::string RemotePeerName(const Gid& local_gid, const Gid& remote_gid);
// false for anything RemotePeerName did not make.
bool ParseRemotePeerName(const std::string& name, Gid* local_gid, Gid* remote_gid);
inline bool IsRemotePeerName(const std::string& name) {
  return name.rfind("roce:", 0) == 0;
}

}  // namespace softrdma::cm
