#include "cm/gsi_sender.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cm/address.h"

namespace softrdma::cm {
namespace {

constexpr uint32_t kGsiQpn = 1;
constexpr uint32_t kGsiQkey = 0x80010000;
constexpr uint32_t kOwnQkey = 0x00010000;

}  // namespace

GsiSender::~GsiSender() {
  // The CM lives as long as its process (Service is never destroyed); this
  // is for completeness and tests.
  for (auto& [key, ah] : ahs_) ibv_destroy_ah(ah);
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  std::free(buffers_);
}

Status GsiSender::Open(ibv_context* context, ibv_pd* pd) {
  if (qp_ != nullptr) return Status::Ok();
  if (buffers_ != nullptr) return Status::Error(EIO, "GSI QP unusable");  // failed before
  context_ = context;
  pd_ = pd;
  buffers_ = static_cast<uint8_t*>(std::aligned_alloc(4096, kSlots * kMadSize));
  if (buffers_ == nullptr) return Status::Error(ENOMEM, "GSI send buffers");
  mr_ = ibv_reg_mr(pd, buffers_, kSlots * kMadSize, 0);
  cq_ = ibv_create_cq(context, kSlots, nullptr, nullptr, 0);
  if (mr_ == nullptr || cq_ == nullptr) return Status::Error(errno, "GSI MR/CQ");
  ibv_qp_init_attr_ex init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = kSlots;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  init.pd = pd;
  // Source QPN 1: it sends as the GSI, and the verbs library has it read the
  // RoCE wire from RTR on, where other hosts' MADs for QP1 arrive.
  init.create_flags = IBV_QP_CREATE_SOURCE_QPN;
  init.source_qpn = kGsiQpn;
  qp_ = ibv_create_qp_ex(context, &init);
  if (qp_ == nullptr) return Status::Error(errno, "GSI UD QP");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  // The GSI's Q_Key (0x80010000) is a controlled one, which an unprivileged
  // QP may not hold (EPERM); the verbs library gives every send to QP1 that
  // Q_Key itself. The QP's own Q_Key matters only for what it receives:
  // nothing (answers come through the GSI forwarder).
  attr.qkey = kOwnQkey;
  if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0)
    return Status::Error(errno, "GSI QP to INIT");
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE) != 0) return Status::Error(errno, "GSI QP to RTR");
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0)
    return Status::Error(errno, "GSI QP to RTS");
  return Status::Ok();
}

void GsiSender::Reap() {
  ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(cq_, 16, wc);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) send_errors_++;
    }
    in_flight_ -= n;
  }
}

ibv_ah* GsiSender::AddressHandle(int gid_index, const Gid& remote_gid) {
  auto key = std::make_pair(gid_index, remote_gid);
  if (auto it = ahs_.find(key); it != ahs_.end()) return it->second;
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.port_num = 1;
  attr.grh.sgid_index = uint8_t(gid_index);
  attr.grh.hop_limit = 64;
  std::memcpy(attr.grh.dgid.raw, remote_gid.data(), 16);
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  if (ah != nullptr) ahs_[key] = ah;
  return ah;
}

Status GsiSender::Send(ibv_context* context, ibv_pd* pd, const Gid& local_gid,
                       const Gid& remote_gid, std::span<const uint8_t, kMadSize> mad) {
  Status status = Open(context, pd);
  if (!status.ok()) return status;
  int gid_index = FindGidIndex(context_, local_gid);
  if (gid_index < 0) return Status::Error(EADDRNOTAVAIL, "no GID for the local address");
  ibv_ah* ah = AddressHandle(gid_index, remote_gid);
  if (ah == nullptr) return Status::Error(errno, "GSI address handle");
  Reap();
  if (in_flight_ >= kSlots) return Status::Error(EAGAIN, "GSI sends in flight");
  uint8_t* buffer = buffers_ + size_t(next_slot_) * kMadSize;
  std::memcpy(buffer, mad.data(), kMadSize);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), uint32_t(kMadSize), mr_->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = uint64_t(next_slot_);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = kGsiQpn;
  wr.wr.ud.remote_qkey = kGsiQkey;
  if (ibv_post_send(qp_, &wr, &bad) != 0) return Status::Error(errno, "GSI post");
  next_slot_ = (next_slot_ + 1) % kSlots;
  in_flight_++;
  return Status::Ok();
}

}  // namespace softrdma::cm
