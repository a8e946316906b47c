// Address handles: ibv_create_ah / ibv_destroy_ah, and the reply path of a
// UD server, ibv_init_ah_from_wc / ibv_create_ah_from_wc, which turn the GRH
// area of a received datagram back into an address (the sender's GID
// becomes the destination, our GID it arrived at becomes the source).
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "core/ah.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/objects.h"
#include "core/qp_state_machine.h"
#include "core/verbs.h"

namespace softrdma::verbs {

namespace {

std::atomic<int> g_ah_count{0};
std::atomic<uint32_t> g_next_ah_handle{1};

bool Ipv4HeaderValid(const uint8_t* ip) {
  if (ip[0] != 0x45) return false;  // version 4, no options (RoCEv2)
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

void MapV4(const uint8_t* addr, ibv_gid* gid) {
  memset(gid->raw, 0, 10);
  gid->raw[10] = gid->raw[11] = 0xff;
  memcpy(gid->raw + 12, addr, 4);
}

// The GRH area holds either an IPv6 header or 20 bytes + an IPv4 header.
// Classified as libibverbs does: a byte-0 version other than 6 means IPv4
// (if byte 20 says so), and even with 6 there, a valid IPv4 header in the
// second half wins (its first 20 bytes are zero, which is "version 0").
int ParseGrh(const uint8_t* g, ibv_global_route* route, ibv_gid* local) {
  const uint8_t* ip = g + 20;
  const bool v4 = (g[0] >> 4) != 6 ? (ip[0] >> 4) == 4 : Ipv4HeaderValid(ip);
  if ((g[0] >> 4) != 6 && !v4) return EINVAL;
  if (v4) {
    MapV4(ip + 12, &route->dgid);
    MapV4(ip + 16, local);
    route->traffic_class = ip[1];
    route->flow_label = 0;
  } else {
    memcpy(route->dgid.raw, g + 8, 16);
    memcpy(local->raw, g + 24, 16);
    route->traffic_class = static_cast<uint8_t>((g[0] & 0xf) << 4 | g[1] >> 4);
    route->flow_label = static_cast<uint32_t>((g[1] & 0xf) << 16 | g[2] << 8 | g[3]);
  }
  // A reply may cross as many hops as anything may (rdma-core uses 0xff).
  route->hop_limit = 0xff;
  return 0;
}

}  // namespace

ibv_ah* CreateAh(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) {
    errno = EINVAL;
    return nullptr;
  }
  // The same rule as an RC/UC address vector: a GRH and a populated source
  // GID. dlid is not looked at (Ethernet has no LIDs; UCX passes 0xc000 as
  // a hint of its own).
  ModifyContext mctx;
  mctx.valid_gid_mask = Device::Get().ValidGidMask();
  if (int rc = CheckRoceAddressVector(*attr, mctx)) {
    errno = rc;
    return nullptr;
  }
  if (g_ah_count.fetch_add(1) >= limits::kMaxAh) {
    g_ah_count.fetch_sub(1);
    errno = ENOMEM;
    return nullptr;
  }
  auto* ah = new (std::nothrow) Ah();
  if (!ah) {
    g_ah_count.fetch_sub(1);
    errno = ENOMEM;
    return nullptr;
  }
  ah->attr = *attr;
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  ah->ah.handle = g_next_ah_handle.fetch_add(1);
  Pd::From(pd)->users.fetch_add(1);
  return &ah->ah;
}

int DestroyAh(ibv_ah* ibah) {
  if (!ibah) return EINVAL;
  Pd::From(ibah->pd)->users.fetch_sub(1);
  delete Ah::From(ibah);
  g_ah_count.fetch_sub(1);
  return 0;
}

int InitAhFromWc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                 ibv_ah_attr* ah_attr) {
  if (!context || !wc || !ah_attr || port_num != limits::kPortNum) {
    errno = EINVAL;
    return -1;
  }
  memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  // On Ethernet the GRH is the address; a completion without one cannot be
  // answered.
  if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
    errno = EINVAL;
    return -1;
  }
  ibv_gid local;
  if (ParseGrh(reinterpret_cast<const uint8_t*>(grh), &ah_attr->grh, &local)) {
    errno = EINVAL;
    return -1;
  }
  int index = -1;
  std::vector<GidEntry> gids = Device::Get().Gids();
  for (size_t i = 0; i < gids.size() && i < static_cast<size_t>(limits::kGidTableLen); ++i)
    if (gids[i].valid && memcmp(gids[i].gid.raw, local.raw, 16) == 0) index = static_cast<int>(i);
  if (index < 0) {
    errno = ENOENT;  // arrived at an address this port no longer has
    return -1;
  }
  ah_attr->is_global = 1;
  ah_attr->grh.sgid_index = static_cast<uint8_t>(index);
  return 0;
}

ibv_ah* CreateAhFromWc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_ah_attr attr;
  if (InitAhFromWc(pd->context, port_num, wc, grh, &attr)) return nullptr;
  return CreateAh(pd, &attr);
}

}  // namespace softrdma::verbs
