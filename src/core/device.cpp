#include "core/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include "core/limits.h"
#include "host/mcast_groups.h"
#include "wire/roce/udp_port.h"

namespace softrdma {

namespace {

// Not any real vendor's IEEE OUI (0xFFFFFF is reserved); perftest and pyverbs
// branch on vendor ids, so we must not look like Mellanox or Amazon.
constexpr uint32_t kVendorId = 0xffffff;
constexpr uint32_t kVendorPartId = 0x5f01;  // "softrdma, part 1"
constexpr uint32_t kHwVersion = 1;
const char kFwVersion[] = "softrdma-0.1.0";
// Marker stored in the provider-ops slot: the address of a private object,
// so a vendor library comparing it with its own ops sees "not mine".
const char kProviderMarker[] = "softrdma";

uint64_t Fnv1a(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

ibv_gid MappedIpv4(in_addr addr) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  memcpy(&g.raw[12], &addr.s_addr, 4);
  return g;
}

}  // namespace

Device& Device::Get() {
  static Device* device = new Device();  // never destroyed: clients may use it at exit
  return *device;
}

Device::Device() {
  ibv_device& d = impl_.dev;
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;  // RoCE devices report the IB transport
  snprintf(d.name, sizeof d.name, "softrdma0");
  snprintf(d.dev_name, sizeof d.dev_name, "usoftrdma0");
  snprintf(d.dev_path, sizeof d.dev_path, "/sys/class/infiniband_verbs/usoftrdma0");
  snprintf(d.ibdev_path, sizeof d.ibdev_path, "/sys/class/infiniband/softrdma0");
  impl_.provider_ops = kProviderMarker;

  // A stable per-host GUID (same in every process of the host), with the
  // locally administered bit set so that it can never collide with a
  // manufacturer-assigned EUI-64.
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  uint64_t guid = (Fnv1a(host) & 0xffffffffffffull) | (0x02ull << 56);
  node_guid_ = htobe64(guid);
  RefreshGids();
}

bool Device::IsOurs(const ibv_device* dev) {
  return dev == Get().verbs_device();
}

void Device::RefreshGids() {
  std::vector<GidEntry> table;
  std::vector<GidEntry> loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
      if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
      GidEntry e;
      e.valid = true;
      e.ifindex = if_nametoindex(ifa->ifa_name);
      if (ifa->ifa_addr->sa_family == AF_INET) {
        e.gid = MappedIpv4(reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr);
      } else if (ifa->ifa_addr->sa_family == AF_INET6) {
        auto* a6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
        if (IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) continue;  // ::1 is not a RoCE address
        memcpy(e.gid.raw, &a6->sin6_addr, 16);
      } else {
        continue;
      }
      // Routable addresses first, so tools that pick "the first IPv4 GID"
      // (perftest) choose one that also works across hosts.
      (ifa->ifa_flags & IFF_LOOPBACK ? loopback : table).push_back(e);
    }
    freeifaddrs(list);
  }
  // IPv4 entries before IPv6 ones within each group, keeping interface order.
  auto by_family = [](const GidEntry& a, const GidEntry& b) {
    bool a4 = a.gid.raw[10] == 0xff && a.gid.raw[11] == 0xff && a.gid.global.subnet_prefix == 0;
    bool b4 = b.gid.raw[10] == 0xff && b.gid.raw[11] == 0xff && b.gid.global.subnet_prefix == 0;
    return a4 && !b4;
  };
  std::stable_sort(table.begin(), table.end(), by_family);
  table.insert(table.end(), loopback.begin(), loopback.end());
  if (loopback.empty()) {
    // Keep 127.0.0.1 usable even where getifaddrs does not list lo (it is
    // always there in a network namespace, but may be down).
    GidEntry e;
    e.valid = true;
    e.ifindex = 1;
    in_addr lo{htonl(INADDR_LOOPBACK)};
    e.gid = MappedIpv4(lo);
    table.push_back(e);
  }
  if (table.size() > static_cast<size_t>(limits::kGidTableLen)) table.resize(limits::kGidTableLen);
  // The port's MTU: the interfaces of the addresses the RoCE wire binds
  // (SOFTRDMA_ROCE_ADDRS, read as the port reads it; else every address of
  // the table, lo's included).
  std::vector<in6_addr> wire;
  const char* named = getenv("SOFTRDMA_ROCE_ADDRS");
  if (named && *named && !roce::ParseAddressList(named, &wire).ok()) wire.clear();
  if (wire.empty())
    for (const GidEntry& e : table) {
      in6_addr a;
      memcpy(a.s6_addr, e.gid.raw, 16);
      wire.push_back(a);
    }
  std::vector<uint32_t> interface_mtus;
  for (const in6_addr& a : wire) interface_mtus.push_back(roce::InterfaceMtuOfAddress(a));
  active_mtu_.store(PortMtuForInterfaceMtus(interface_mtus), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(gid_mutex_);
  gids_ = std::move(table);
  // After the table: a cache that read the old generation before its lookup
  // looks again next time, whichever table that lookup saw.
  gid_generation_.fetch_add(1, std::memory_order_release);
}

ibv_mtu Device::PortMtuForInterfaceMtus(const std::vector<uint32_t>& interface_mtus) {
  uint32_t largest = 0;
  for (uint32_t m : interface_mtus)
    if (m > 0) largest = std::max(largest, std::max(256u, roce::RoceMtuForInterfaceMtu(m)));
  if (largest == 0) return IBV_MTU_4096;
  int code = IBV_MTU_256;
  while (code < IBV_MTU_4096 && (128u << (code + 1)) <= largest) ++code;
  return static_cast<ibv_mtu>(code);
}

std::vector<GidEntry> Device::Gids() const {
  std::lock_guard<std::mutex> lock(gid_mutex_);
  return gids_;
}

bool Device::GidAt(int index, GidEntry* out) const {
  std::lock_guard<std::mutex> lock(gid_mutex_);
  if (index < 0 || static_cast<size_t>(index) >= gids_.size()) return false;
  *out = gids_[index];
  return out->valid;
}

uint64_t Device::ValidGidMask() const {
  std::lock_guard<std::mutex> lock(gid_mutex_);
  uint64_t mask = 0;
  for (size_t i = 0; i < gids_.size(); ++i)
    if (gids_[i].valid) mask |= 1ull << i;
  return mask;
}

bool Device::IsLocalGid(const ibv_gid& gid) const {
  std::lock_guard<std::mutex> lock(gid_mutex_);
  for (const GidEntry& e : gids_)
    if (e.valid && memcmp(e.gid.raw, gid.raw, 16) == 0) return true;
  return false;
}

bool GidLookupCache::IsLocal(const ibv_gid& gid) {
  const Device& device = Device::Get();
  const uint64_t generation = device.gid_generation();  // before the lookup: see RefreshGids
  if (generation != local_generation_ || memcmp(gid.raw, local_gid_.raw, sizeof gid.raw) != 0) {
    local_ = device.IsLocalGid(gid);
    local_gid_ = gid;
    local_generation_ = generation;
    ++refills_;
  }
  return local_;
}

bool GidLookupCache::At(int index, GidEntry* out) {
  const Device& device = Device::Get();
  const uint64_t generation = device.gid_generation();
  if (generation != at_generation_ || index != at_index_) {
    at_found_ = device.GidAt(index, &at_);
    at_index_ = index;
    at_generation_ = generation;
    ++refills_;
  }
  if (at_found_) *out = at_;
  return at_found_;
}

void Device::QueryDevice(ibv_device_attr* a) const {
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "%s", kFwVersion);
  a->node_guid = node_guid_;
  a->sys_image_guid = node_guid_;
  a->max_mr_size = limits::kMaxMrSize;
  a->page_size_cap = limits::kPageSizeCap;
  a->vendor_id = kVendorId;
  a->vendor_part_id = kVendorPartId;
  a->hw_ver = kHwVersion;
  a->max_qp = limits::kMaxQp;
  a->max_qp_wr = limits::kMaxQpWr;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CHANGE_PHY_PORT |
                        IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_XRC |
                        // Windows: type 1, and type 2 bound to a QP and its PD (2B).
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
  a->max_sge = limits::kMaxSge;
  a->max_sge_rd = limits::kMaxSge;
  a->max_cq = limits::kMaxCq;
  a->max_cqe = limits::kMaxCqe;
  a->max_mr = limits::kMaxMr;
  a->max_mw = limits::kMaxMr;  // windows and MRs share the table's slots
  a->max_pd = limits::kMaxPd;
  a->max_qp_rd_atom = limits::kMaxQpRdAtom;
  a->max_res_rd_atom = limits::kMaxQpRdAtom * 1024;
  a->max_qp_init_rd_atom = limits::kMaxQpInitRdAtom;
  a->max_srq = limits::kMaxSrq;
  a->max_srq_wr = limits::kMaxSrqWr;
  a->max_srq_sge = limits::kMaxSrqSge;
  a->max_ah = limits::kMaxAh;
  // Atomics are atomic with respect to every softrdma atomic on the host
  // (host-wide striped locks, transport/atomics.h), not to the CPU's own
  // accesses: exactly IBV_ATOMIC_HCA.
  a->atomic_cap = IBV_ATOMIC_HCA;
  // UD multicast: one host-wide table of (QP, group) attachments
  // (host/mcast_groups.h) bounds all three.
  a->max_mcast_grp = kMcastTableSize;
  a->max_mcast_qp_attach = kMcastTableSize;
  a->max_total_mcast_qp_attach = kMcastTableSize;
  a->max_pkeys = limits::kPkeyTableLen;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = limits::kPortCount;
}

void Device::QueryPort(ibv_port_attr* a) const {
  memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = limits::kMaxMtu;
  a->active_mtu = active_mtu();
  // A fixed-size table with empty (all-zero) slots after the host's
  // addresses, like a NIC's; every index below gid_tbl_len can be queried.
  a->gid_tbl_len = limits::kGidTableLen;
  a->port_cap_flags = IBV_PORT_CM_SUP;
  a->max_msg_sz = limits::kMaxMsgSize;
  a->pkey_tbl_len = limits::kPkeyTableLen;
  a->max_vl_num = 1;
  a->active_width = 2;   // 4X
  a->active_speed = 32;  // EDR: reported as 100 Gb/s
  a->phys_state = 5;     // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

}  // namespace softrdma
