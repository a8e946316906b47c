// CM MADs to another host: UD SENDs to QP1 (the GSI) of the peer's address,
// Q_Key 0x80010000 (ib-cm.md §1), from a UD QP of the CM's own, made with
// the public verbs API like any application's. The RoCE wire carries them as
// UD SEND packets to destination QPN 1; on the receiving host the GSI
// forwarder (host/gsi_forwarder.h) hands each to the CM socket it is for, and
// the answer comes back the same way to QP1 of our address.
// Such a peer is named by the pair of addresses (cm/remote_peer.h).
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "cm/mad_codec.h"
#include "cm/remote_peer.h"
#include "util/status.h"

namespace softrdma::cm {

class GsiSender {
 public:
  GsiSender() = default;
  ~GsiSender();
  GsiSender(const GsiSender&) = delete;
  GsiSender& operator=(const GsiSender&) = delete;

  // Posts one MAD from `local_gid` (one of the device's GIDs) to QP1 at
  // `remote_gid`. EADDRNOTAVAIL: `local_gid` is not in the GID table;
  // EAGAIN: every send buffer is in flight (the caller retries it later);
  // another errno when the QP cannot be made or the post fails.
  Status Send(ibv_context* context, ibv_pd* pd, const Gid& local_gid, const Gid& remote_gid,
              std::span<const uint8_t, kMadSize> mad);

  // Makes the UD QP now (a listener's CM does: created with source QPN 1,
  // it makes the verbs library read the RoCE wire, where other hosts' MADs
  // for QP1 arrive). Idempotent.
  Status Open(ibv_context* context, ibv_pd* pd);

  uint64_t send_errors() const { return send_errors_; }

 private:
  static constexpr int kSlots = 64;
  void Reap();
  ibv_ah* AddressHandle(int gid_index, const Gid& remote_gid);

  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  uint8_t* buffers_ = nullptr;  // kSlots MADs; UD sends complete in order
  int next_slot_ = 0;
  int in_flight_ = 0;
  uint64_t send_errors_ = 0;
  std::map<std::pair<int, Gid>, ibv_ah*> ahs_;
};

}  // namespace softrdma::cm
