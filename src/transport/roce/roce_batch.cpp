#include "transport/roce/roce_batch.h"

#include <cstring>
#include <span>

#include "transport/engine.h"
#include "util/log.h"

namespace softrdma::transport::roce {

namespace sr = softrdma::roce;

bool PacketBatch::Add(const TransportHeaders& h, const iovec* payload, int npayload,
                      size_t payload_length) {
  if (full()) return false;
  uint8_t* header = headers_[count_];
  size_t header_length = 0;
  const Status s =
      sr::EncodeTransportHeaders(h, payload_length, {header, sizeof headers_[0]}, &header_length);
  if (!s.ok()) {
    SOFTRDMA_LOG(kWarn, "RoCE: cannot encode a packet: %s", s.message().c_str());
    return false;
  }
  sr::OutDatagram& d = datagrams_[count_];
  d = sr::OutDatagram{};
  d.to = to_;
  memcpy(d.from.s6_addr, net_.src_gid.data(), 16);
  d.src_port = net_.udp_src_port;
  // Header, payload (at most two pieces by reference), trailer.
  d.parts[d.nparts++] = iovec{header, header_length};
  constexpr int kPayloadParts = sr::OutDatagram::kMaxParts - 2;
  if (npayload > kPayloadParts) {
    if (!copies_) copies_.reset(new uint8_t[size_t{kMaxPackets} * sr::kMaxPayload]);
    uint8_t* copy = copies_.get() + size_t(count_) * sr::kMaxPayload;
    size_t at = 0;
    for (int i = 0; i < npayload; ++i) {
      memcpy(copy + at, payload[i].iov_base, payload[i].iov_len);
      at += payload[i].iov_len;
    }
    d.parts[d.nparts++] = iovec{copy, at};
  } else {
    for (int i = 0; i < npayload; ++i)
      if (payload[i].iov_len > 0) d.parts[d.nparts++] = payload[i];
  }
  uint8_t* trailer = trailers_[count_];
  const uint8_t pad = sr::PadCount(payload_length);
  memset(trailer, 0, pad);
  // The ICRC over the parts so far and the pad (for IPv4 ID 0: packet_port.h).
  std::span<const uint8_t> pieces[sr::OutDatagram::kMaxParts];
  int npieces = 0;
  for (int i = 0; i < d.nparts; ++i)
    pieces[npieces++] = {static_cast<const uint8_t*>(d.parts[i].iov_base), d.parts[i].iov_len};
  pieces[npieces++] = {trailer, pad};
  const uint32_t icrc = sr::ComputeIcrc(net_, std::span(pieces, size_t(npieces)));
  sr::StoreIcrc(icrc, std::span<uint8_t, sr::kIcrcSize>(trailer + pad, sr::kIcrcSize));
  d.parts[d.nparts++] = iovec{trailer, pad + sr::kIcrcSize};
  ++count_;
  return true;
}

int PacketBatch::Flush() {
  sr::PacketPort* port = engine_.packet_port();
  Counters& c = GetCounters();
  int done = 0;
  while (done < count_ && port) {
    const int sent = port->Send(datagrams_ + done, count_ - done);
    if (sent == 0) break;  // full: the rest later
    if (sent > 0) {
      c.tx_packets.fetch_add(uint64_t(sent), std::memory_order_relaxed);
      done += sent;
      continue;
    }
    // Refused for good (EMSGSIZE, no route): that datagram is lost.
    const sr::OutDatagram& d = datagrams_[done];
    size_t bytes = 0;
    for (int i = 0; i < d.nparts; ++i) bytes += d.parts[i].iov_len;
    CountSendError(-sent, bytes);
    ++done;
  }
  if (done < count_) c.send_refused.fetch_add(1, std::memory_order_relaxed);
  count_ = 0;
  return done;
}

}  // namespace softrdma::transport::roce
