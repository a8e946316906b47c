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
  // Moves (never back, never 0 once the device exists) each time RefreshGids
  // replaces the table, so that a GidLookupCache knows its answers are stale.
  uint64_t gid_generation() const { return gid_generation_.load(std::memory_order_acquire); }
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
  std::atomic<uint64_t> gid_generation_{0};
  std::atomic<ibv_mtu> active_mtu_{IBV_MTU_4096};
};

// Device::GidAt and Device::IsLocalGid for one sender's path, answered from
// the last lookup while the GID table is unchanged. Every Device lookup takes
// the table's mutex (two locked instructions and ~110 instructions a call),
// and a UD datagram needed two of them: ~225 instructions per send of
// ibv_ud_pingpong's ~1,400 (callgrind, session 9). Not thread-safe: its
// owner serializes the calls (a QP's cache is used under the QP's lock).
class GidLookupCache {
 public:
  bool IsLocal(const ibv_gid& gid);
  bool At(int index, GidEntry* out);
  uint64_t refills() const { return refills_; }  // lookups that went to the Device (tests)

 private:
  uint64_t local_generation_ = 0;  // 0: nothing kept (the table's starts at 1)
  ibv_gid local_gid_{};
  bool local_ = false;
  uint64_t at_generation_ = 0;
  int at_index_ = -1;
  GidEntry at_{};
  bool at_found_ = false;
  uint64_t refills_ = 0;
};

}  // namespace softrdma
