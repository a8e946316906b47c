// The /sys/class entries `softrdma run` lays over the real /sys/class: one
// infiniband/<device> directory per device, with the attributes RDMA
// middleware reads outside libibverbs (UCX, pyverbs, rdma-core's tools), and
// infiniband_verbs/<uverbs node> naming the device. A pure description (no
// file system access), so it can be checked value by value.
#pragma once

#include <string>
#include <vector>

#include "cli/device_snapshot.h"

namespace softrdma::cli {

struct TreeEntry {
  enum class Kind { kDirectory, kFile, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;     // relative to the class directory, e.g. "infiniband/softrdma0/node_guid"
  std::string content;  // file text, or the symlink's target
};

// Entries in creation order (every directory before what it holds).
std::vector<TreeEntry> BuildSysClassTree(const std::vector<DeviceSnapshot>& devices);

// The interfaces listed under infiniband/<dev>/device/net/: those of the
// device's GIDs other than loopback ones, in GID order, without repeats; a
// loopback interface only when there is no other.
std::vector<std::string> NetDevicesOf(const DeviceSnapshot& device);

}  // namespace softrdma::cli
