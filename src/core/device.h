// The virtual device softrdma0: its identity, its attributes and its GID
// table. There is exactly one device per process image; its ibv_device is
// handed out by ibv_get_device_list and never freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include <infiniband/verbs.h>

namespace softrdma {

// One GID table entry. RoCEv2 GIDs are IPv4-mapped (::ffff:a.b.c.d) or IPv6
// addresses of the host's interfaces.
struct GidEntry {
  ibv_gid gid{};
  uint32_t ifindex = 0;
  bool valid = false;
};

// rdma-core wraps struct ibv_device as the first member of its verbs_device,
// whose next field is the provider-ops pointer. Vendor helpers loaded into
// the process (libmlx5, libefa) read that pointer to decide "is this my
// device?", so it must exist and hold something that is not theirs.
struct DeviceImpl {
  ibv_device dev;
  const void* provider_ops = nullptr;
};
static_assert(offsetof(DeviceImpl, provider_ops) == 664, "verbs_device layout");

class Device {
 public:
  static Device& Get();

  ibv_device* verbs_device() { return &impl_.dev; }
  static bool IsOurs(const ibv_device* dev);

  uint64_t node_guid() const { return node_guid_; }  // network byte order
  void QueryDevice(ibv_device_attr* attr) const;
  void QueryPort(ibv_port_attr* attr) const;

  // The GID table, rebuilt from the host's addresses when the device list is
  // (re)read, as rxe does when addresses change.
  void RefreshGids();
  std::vector<GidEntry> Gids() const;
  bool GidAt(int index, GidEntry* out) const;
  // Bit i set = GID index i holds a usable address.
  uint64_t ValidGidMask() const;
  // True if the GID names an address of this host (peer reachable over shm).
  bool IsLocalGid(const ibv_gid& gid) const;
  // The port's active MTU (docs/design.md "The port's MTU"), recomputed with
  // the GID table: the largest IB MTU one of the RoCE wire's interfaces
  // carries (rxe's rule per interface: 1500 -> 1024, 9000 -> 4096, lo 4096).
  ibv_mtu active_mtu() const { return active_mtu_.load(std::memory_order_relaxed); }
  // The rule itself, for the IP MTUs of those interfaces (0 = unknown,
  // skipped); IBV_MTU_4096 when none is known.
  static ibv_mtu PortMtuForInterfaceMtus(const std::vector<uint32_t>& interface_mtus);

 private:
  Device();
  DeviceImpl impl_{};
  uint64_t node_guid_ = 0;
  mutable std::mutex gid_mutex_;
  std::vector<GidEntry> gids_;
  std::atomic<ibv_mtu> active_mtu_{IBV_MTU_4096};
};

}  // namespace softrdma
