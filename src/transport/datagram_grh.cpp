#include "transport/datagram_grh.h"

#include <cstring>

namespace softrdma::transport {

namespace {

bool IsV4Mapped(const uint8_t* gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(gid, prefix, sizeof prefix) == 0;
}

uint32_t Fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

// UDP + BTH + DETH (+ ImmDt) + payload padded to 4 + ICRC.
uint32_t UdpLength(bool has_imm, uint32_t len) {
  return 8 + 12 + 8 + (has_imm ? 4 : 0) + ((len + 3) & ~3u) + 4;
}

constexpr uint32_t kIpv4At = 20;  // the IPv4 header's offset in the area

}  // namespace

void GrhTemplate::Build(const GrhRoute& r) {
  memset(bytes_, 0, sizeof bytes_);
  ipv4_ = IsV4Mapped(r.sgid.raw) && IsV4Mapped(r.dgid.raw);
  if (ipv4_) {
    uint8_t* ip = bytes_ + kIpv4At;
    ip[0] = 0x45;
    ip[1] = r.traffic_class;
    ip[6] = 0x40;  // don't fragment
    ip[8] = r.hop_limit;
    ip[9] = 17;  // UDP
    memcpy(ip + 12, r.sgid.raw + 12, 4);
    memcpy(ip + 16, r.dgid.raw + 12, 4);
    // Total length (bytes 2-3) and checksum (10-11) are zero here, so the
    // sum of all words is the sum of the others.
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
    partial_sum_ = Fold(sum);
    return;
  }
  bytes_[0] = static_cast<uint8_t>(0x60 | r.traffic_class >> 4);
  bytes_[1] = static_cast<uint8_t>((r.traffic_class & 0xf) << 4 | ((r.flow_label >> 16) & 0xf));
  bytes_[2] = static_cast<uint8_t>(r.flow_label >> 8);
  bytes_[3] = static_cast<uint8_t>(r.flow_label);
  bytes_[6] = 17;  // next header: UDP
  bytes_[7] = r.hop_limit;
  memcpy(bytes_ + 8, r.sgid.raw, 16);
  memcpy(bytes_ + 24, r.dgid.raw, 16);
}

void GrhTemplate::WriteFor(bool has_imm, uint32_t len, uint8_t* out) const {
  memcpy(out, bytes_, kGrhBytes);
  const uint32_t udp_len = UdpLength(has_imm, len);
  if (ipv4_) {
    uint8_t* ip = out + kIpv4At;
    const uint32_t total = 20 + udp_len;
    ip[2] = static_cast<uint8_t>(total >> 8);
    ip[3] = static_cast<uint8_t>(total);
    const uint16_t sum = static_cast<uint16_t>(~Fold(partial_sum_ + total));
    ip[10] = static_cast<uint8_t>(sum >> 8);
    ip[11] = static_cast<uint8_t>(sum);
    return;
  }
  out[4] = static_cast<uint8_t>(udp_len >> 8);
  out[5] = static_cast<uint8_t>(udp_len);
}

void DatagramGrhCache::Rebuild(const UdAddress& ud, GidLookupCache& gids) {
  // The generation before the lookups (as GidLookupCache): a refresh
  // meanwhile makes the next For build again.
  const uint64_t generation = Device::Get().gid_generation();
  GrhRoute route{};
  GidEntry src;
  if (gids.At(ud.sgid_index, &src)) route.sgid = src.gid;  // else zero, as a NIC's unset GID
  route.dgid = ud.dgid;
  route.flow_label = ud.flow_label;
  route.traffic_class = ud.traffic_class;
  route.hop_limit = ud.hop_limit;
  template_.Build(route);
  dgid_local_ = gids.IsLocal(ud.dgid);
  generation_ = generation;
  dgid_ = ud.dgid;
  flow_label_ = ud.flow_label;
  sgid_index_ = ud.sgid_index;
  hop_limit_ = ud.hop_limit;
  traffic_class_ = ud.traffic_class;
  ++rebuilds_;
}

}  // namespace softrdma::transport
