#include "cli/device_query.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <dlfcn.h>
#include <endian.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

namespace softrdma::cli {

namespace {

std::string Reason(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

bool IsLoopbackInterface(const char* ifname) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq request{};
  std::snprintf(request.ifr_name, sizeof request.ifr_name, "%s", ifname);
  const bool loopback =
      ioctl(fd, SIOCGIFFLAGS, &request) == 0 && (request.ifr_flags & IFF_LOOPBACK);
  close(fd);
  return loopback;
}

GidSlot QueryGidSlot(ibv_context* ctx, int port, int index) {
  GidSlot slot;
  ibv_gid_entry entry{};
  // ENODATA marks an empty slot; any other failure also leaves it empty,
  // which is what a reader of sysfs would see for a slot it cannot read.
  if (ibv_query_gid_ex(ctx, port, index, &entry, 0) != 0) return slot;
  slot.valid = true;
  std::memcpy(slot.raw.data(), entry.gid.raw, slot.raw.size());
  slot.type = static_cast<int>(entry.gid_type);
  char ifname[IF_NAMESIZE] = {};
  if (entry.ndev_ifindex != 0 && if_indextoname(entry.ndev_ifindex, ifname) != nullptr) {
    slot.netdev = ifname;
    slot.netdev_loopback = IsLoopbackInterface(ifname);
  }
  return slot;
}

bool QueryPortSnapshot(ibv_context* ctx, int port, PortSnapshot* out, std::string* error) {
  ibv_port_attr attr{};
  if (int err = ibv_query_port(ctx, static_cast<uint8_t>(port), &attr); err != 0) {
    *error = Reason("ibv_query_port", err);
    return false;
  }
  out->port_num = port;
  out->state = attr.state;
  out->phys_state = attr.phys_state;
  out->link_layer = attr.link_layer;
  out->lid = attr.lid;
  out->sm_lid = attr.sm_lid;
  out->sm_sl = attr.sm_sl;
  out->lmc = attr.lmc;
  out->cap_flags = attr.port_cap_flags;
  out->active_width = attr.active_width;
  out->active_speed = attr.active_speed;
  for (int i = 0; i < attr.gid_tbl_len; ++i) out->gids.push_back(QueryGidSlot(ctx, port, i));
  for (int i = 0; i < static_cast<int>(attr.pkey_tbl_len); ++i) {
    __be16 pkey = 0;
    if (int err = ibv_query_pkey(ctx, static_cast<uint8_t>(port), i, &pkey); err != 0) {
      *error = Reason("ibv_query_pkey", err);
      return false;
    }
    out->pkeys.push_back(be16toh(pkey));
  }
  return true;
}

bool QueryOne(ibv_device* dev, DeviceSnapshot* out, std::string* error) {
  out->name = ibv_get_device_name(dev);
  out->dev_name = dev->dev_name;
  out->node_type = dev->node_type;
  std::unique_ptr<ibv_context, int (*)(ibv_context*)> ctx(ibv_open_device(dev), ibv_close_device);
  if (!ctx) {
    *error = Reason("ibv_open_device", errno);
    return false;
  }
  ibv_device_attr attr{};
  if (int err = ibv_query_device(ctx.get(), &attr); err != 0) {
    *error = Reason("ibv_query_device", err);
    return false;
  }
  out->node_guid = be64toh(attr.node_guid);
  out->sys_image_guid = be64toh(attr.sys_image_guid);
  out->fw_ver = attr.fw_ver;
  for (int port = 1; port <= attr.phys_port_cnt; ++port) {
    PortSnapshot snapshot;
    if (!QueryPortSnapshot(ctx.get(), port, &snapshot, error)) return false;
    out->ports.push_back(std::move(snapshot));
  }
  return true;
}

}  // namespace

bool QueryDevices(std::vector<DeviceSnapshot>* out, std::string* error) {
  int count = 0;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> list(ibv_get_device_list(&count),
                                                            ibv_free_device_list);
  if (!list) {
    *error = Reason("ibv_get_device_list", errno);
    return false;
  }
  if (count == 0) {
    *error = "ibv_get_device_list: no RDMA device listed";
    return false;
  }
  for (int i = 0; i < count; ++i) {
    DeviceSnapshot snapshot;
    if (!QueryOne(list.get()[i], &snapshot, error)) return false;
    out->push_back(std::move(snapshot));
  }
  return true;
}

std::string LoadedVerbsLibraryDir() {
  // The definition the dynamic linker bound, not a PLT stub of this
  // executable: dlsym finds it in the library that really provides it.
  void* symbol = dlsym(RTLD_DEFAULT, "ibv_get_device_list");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  char resolved[PATH_MAX];
  std::string path = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace softrdma::cli
