// Packets of one QP gathered for one PacketPort::Send (one system call for a
// message's packets, and one GSO send where the port can), instead of one
// Send per packet. The headers and each packet's pad + ICRC live in the
// batch; the payload is referenced where it is (registered memory, the
// inline slot) and copied once, by the kernel, during Send.
#pragma once

#include <cstdint>
#include <memory>

#include <sys/uio.h>

#include "transport/roce/roce_packets.h"

namespace softrdma::transport::roce {

class PacketBatch {
 public:
  static constexpr int kMaxPackets = 32;

  PacketBatch(Engine& engine, const NetworkHeaders& net, const IpEndpoint& to)
      : engine_(engine), net_(net), to_(to) {}
  PacketBatch(const PacketBatch&) = delete;
  PacketBatch& operator=(const PacketBatch&) = delete;

  bool full() const { return count_ == kMaxPackets; }
  int size() const { return count_; }

  // Adds a packet: `h` (PadCnt and TVer filled in) and the payload gathered
  // from `payload`, which must stay valid until Flush. false: the batch is
  // full or the headers cannot be encoded (logged; nothing added).
  bool Add(const TransportHeaders& h, const iovec* payload, int npayload, size_t payload_length);

  // Sends the gathered packets in order; returns how many the port took from
  // the start (the others were not sent; they are counted as refused) and
  // empties the batch.
  int Flush();

 private:
  static constexpr size_t kTrailerSize = 8;  // pad (0..3) and the ICRC
  Engine& engine_;
  const NetworkHeaders& net_;
  const IpEndpoint& to_;
  int count_ = 0;
  alignas(8) uint8_t headers_[kMaxPackets][softrdma::roce::kMaxTransportHeaderLength];
  alignas(8) uint8_t trailers_[kMaxPackets][kTrailerSize];
  softrdma::roce::OutDatagram datagrams_[kMaxPackets];
  // Payloads of more pieces than a datagram has parts for, copied together
  // (allocated on first need: SGE lists that cut a packet in three or more).
  std::unique_ptr<uint8_t[]> copies_;
};

}  // namespace softrdma::transport::roce
