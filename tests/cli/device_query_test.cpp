// QueryDevices against softrdma's libibverbs.so.1 (the one this test links):
// the snapshot holds what the verbs queries return, slot by slot.
#include "cli/device_query.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

namespace softrdma::cli {
namespace {

namespace fs = std::filesystem;

// Opening the device creates the host registry in /dev/shm: give this test
// process a namespace of its own and remove what it left.
class ShmNamespace : public ::testing::Environment {
 public:
  void SetUp() override { setenv("SOFTRDMA_NAMESPACE", name_.c_str(), 1); }
  void TearDown() override {
    const std::string prefix = "softrdma-" + name_ + "-";
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove(entry.path());
    }
  }

 private:
  const std::string name_ = "cliut" + std::to_string(getpid());
};
const auto* const kShmNamespace = ::testing::AddGlobalTestEnvironment(new ShmNamespace);

TEST(DeviceQuery, SnapshotMatchesTheVerbsQueries) {
  std::vector<DeviceSnapshot> devices;
  std::string error;
  ASSERT_TRUE(QueryDevices(&devices, &error)) << error;
  ASSERT_EQ(devices.size(), 1u);
  const DeviceSnapshot& d = devices[0];
  EXPECT_EQ(d.name, "softrdma0");
  EXPECT_EQ(d.dev_name, "usoftrdma0");

  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  ASSERT_NE(list, nullptr);
  ibv_context* ctx = ibv_open_device(list[0]);
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
  EXPECT_EQ(d.node_guid, be64toh(attr.node_guid));
  EXPECT_EQ(d.fw_ver, attr.fw_ver);
  ASSERT_EQ(d.ports.size(), static_cast<size_t>(attr.phys_port_cnt));
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &port), 0);
  const PortSnapshot& p = d.ports[0];
  EXPECT_EQ(p.state, port.state);
  EXPECT_EQ(p.link_layer, port.link_layer);
  ASSERT_EQ(p.gids.size(), static_cast<size_t>(port.gid_tbl_len));
  int valid = 0;
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx, 1, i, &gid), 0);
    EXPECT_EQ(std::memcmp(gid.raw, p.gids[i].raw.data(), 16), 0) << "GID " << i;
    ibv_gid_entry entry{};
    const bool filled = ibv_query_gid_ex(ctx, 1, i, &entry, 0) == 0;
    EXPECT_EQ(p.gids[i].valid, filled) << "GID " << i;
    if (filled) {
      ++valid;
      EXPECT_EQ(p.gids[i].type, static_cast<int>(entry.gid_type));
      EXPECT_FALSE(p.gids[i].netdev.empty()) << "GID " << i;
    }
  }
  EXPECT_GE(valid, 1);  // at least ::ffff:127.0.0.1
  ASSERT_EQ(p.pkeys.size(), static_cast<size_t>(port.pkey_tbl_len));
  EXPECT_EQ(p.pkeys[0], 0xffff);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
}

TEST(DeviceQuery, LibraryDirectoryHoldsTheLoadedLibrary) {
  const std::string dir = LoadedVerbsLibraryDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(dir + "/libibverbs.so.1")) << dir;
}

}  // namespace
}  // namespace softrdma::cli
