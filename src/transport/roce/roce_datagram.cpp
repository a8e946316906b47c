// UD over RoCE (rc-transport.md §9): one datagram = one SEND ONLY packet of
// at most the MTU, with a DETH (Q_Key, source QP); nothing is answered. The
// receive side hands checked packets to the shm wire's placement
// (datagram.cpp: Q_Key rule, receive WQE, GRH area, completion).
#include <cstring>

#include <endian.h>

#include "core/device.h"
#include "core/limits.h"
#include "transport/engine.h"
#include "transport/roce/roce_packets.h"
#include "transport/transport.h"

namespace softrdma::transport::roce {

namespace sr = softrdma::roce;

DatagramTx TransmitDatagram(Engine& engine, Qp& qp, uint32_t index) {
  const SendWqe& w = qp.sq.at(index);
  NetworkHeaders net;
  GidEntry source;
  if (!Device::Get().GidAt(w.ud.sgid_index, &source)) return DatagramTx::kSent;  // nowhere: lost
  memcpy(net.src_gid.data(), source.gid.raw, 16);
  memcpy(net.dst_gid.data(), w.ud.dgid.raw, 16);
  net.ip_version = sr::IsIpv4Mapped(net.src_gid) && sr::IsIpv4Mapped(net.dst_gid) ? 4 : 6;
  net.udp_src_port = SourcePortFor(engine, net.src_gid);
  IpEndpoint to;
  memcpy(to.addr.s6_addr, w.ud.dgid.raw, 16);
  to.port = sr::kRoceUdpPort;
  TransportHeaders h{};
  const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM;
  h.bth.opcode = imm ? opc::kUdSendOnlyImm : opc::kUdSendOnly;
  h.bth.solicited = w.solicited;
  h.bth.dest_qp = w.ud.remote_qpn;
  h.bth.psn = qp.next_psn;
  h.deth = {w.ud.remote_qkey, qp.qpx.qp_base.qp_num};
  if (imm) h.imm_data = be32toh(w.imm);
  iovec pieces[limits::kMaxSge];
  int n = 0;
  if (w.is_inline) {
    pieces[0] = iovec{qp.inline_slot(index), w.total_len};
    n = w.total_len ? 1 : 0;
  } else {
    n = ResolveLocal(engine, qp, index, w, pieces);
    if (n < 0) return DatagramTx::kBadSge;
  }
  if (!engine.packet_port()) return DatagramTx::kSent;  // no wire: lost, as on a network
  if (!SendPacketTo(engine, net, to, h, pieces, n, w.total_len)) return DatagramTx::kBlocked;
  qp.next_psn = PsnAdd(qp.next_psn, 1);
  engine.ActivateRoce();  // the answers come over the same wire
  return DatagramTx::kSent;
}

void OnUdPacket(Engine& engine, const InDatagram& datagram, const sr::PacketView& view) {
  Counters& c = GetCounters();
  const uint32_t qpn = view.headers.bth.dest_qp;
  // QP1 (the CM's MADs) went to the GSI forwarder before (roce_gsi.h);
  // multicast is not delivered over RoCE yet.
  Qp* qp = qpn == 1 || qpn == sr::kMulticastQpn ? nullptr : engine.LocalQp(qpn);
  if (!qp) {
    c.drop_no_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::lock_guard<SpinLock> lock(qp->lock);
  if (qp->type != IBV_QPT_UD) {
    c.drop_wrong_qp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  RoceDatagramIn in{};
  in.src_qpn = view.headers.deth.src_qp;
  in.qkey = view.headers.deth.qkey;
  memcpy(in.sgid.raw, datagram.from.addr.s6_addr, 16);
  memcpy(in.dgid.raw, datagram.local.s6_addr, 16);
  in.solicited = view.headers.bth.solicited;
  in.has_imm = view.info->Has(sr::kImmDtBit);
  in.imm_be = htobe32(view.headers.imm_data);
  in.payload = view.payload;
  OnRoceDatagram(engine, *qp, in);
}

}  // namespace softrdma::transport::roce
