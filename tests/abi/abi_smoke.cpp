// Calls the exported entry points owned by the ABI layer through the dynamic
// linker, exactly as a client binary binds them (dlvsym with the version it
// would have recorded), and checks their results. Complements the unit tests,
// which only see the softrdma_core helpers behind the shims.
//
// Usage: abi_smoke PATH/TO/libibverbs.so.1
// Expects RDMAV_ALLOW_DISASSOC_DESTROY, SYSFS_PATH, VERBS_LOG_LEVEL and
// VERBS_LOG_FILE to be set as in tests/abi/CMakeLists.txt.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

void* handle = nullptr;

template <typename Fn>
Fn sym(const char* name, const char* version) {
  void* p = dlvsym(handle, name, version);
  if (p == nullptr) {
    std::printf("FAIL: %s@%s not found: %s\n", name, version, dlerror());
    std::exit(1);
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH/TO/libibverbs.so.1\n", argv[0]);
    return 2;
  }
  // RTLD_DEEPBIND keeps the system libibverbs (if anything pulled it in) from
  // answering for ours.
  handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    std::printf("FAIL: dlopen: %s\n", dlerror());
    return 1;
  }

  // Compat and default versions are distinct functions.
  using open_fn = void* (*)(void*);
  auto open_1_0 = sym<open_fn>("ibv_open_device", "IBVERBS_1.0");
  auto open_1_1 = sym<open_fn>("ibv_open_device", "IBVERBS_1.1");
  check(reinterpret_cast<void*>(open_1_0) != reinterpret_cast<void*>(open_1_1),
        "ibv_open_device@IBVERBS_1.0 and @@IBVERBS_1.1 are different functions");
  errno = 0;
  check(open_1_0(nullptr) == nullptr && errno == ENOSYS,
        "ibv_open_device@IBVERBS_1.0 fails with NULL/ENOSYS");
  using destroy_fn = int (*)(void*);
  errno = 0;
  check(sym<destroy_fn>("ibv_destroy_qp", "IBVERBS_1.0")(nullptr) == ENOSYS,
        "ibv_destroy_qp@IBVERBS_1.0 returns ENOSYS");
  using get_cq_event_fn = int (*)(void*, void**, void**);
  errno = 0;
  check(sym<get_cq_event_fn>("ibv_get_cq_event", "IBVERBS_1.0")(nullptr, nullptr, nullptr) == -1 &&
            errno == ENOSYS,
        "ibv_get_cq_event@IBVERBS_1.0 returns -1/ENOSYS");

  // Pure helpers.
  auto wc_str = sym<const char* (*)(ibv_wc_status)>("ibv_wc_status_str", "IBVERBS_1.1");
  check(std::strcmp(wc_str(IBV_WC_SUCCESS), "success") == 0, "ibv_wc_status_str(SUCCESS)");
  check(std::strcmp(wc_str(static_cast<ibv_wc_status>(1000)), "unknown") == 0,
        "ibv_wc_status_str(1000) falls back");
  auto port_str = sym<const char* (*)(ibv_port_state)>("ibv_port_state_str", "IBVERBS_1.1");
  check(std::strcmp(port_str(IBV_PORT_ACTIVE), "active") == 0, "ibv_port_state_str(ACTIVE)");
  auto to_mbps = sym<int (*)(ibv_rate)>("ibv_rate_to_mbps", "IBVERBS_1.1");
  check(to_mbps(IBV_RATE_100_GBPS) == 103125, "ibv_rate_to_mbps(100G)");
  auto to_mult = sym<int (*)(ibv_rate)>("ibv_rate_to_mult", "IBVERBS_1.0");
  check(to_mult(IBV_RATE_40_GBPS) == 16, "ibv_rate_to_mult(40G)");
  auto from_mult = sym<ibv_rate (*)(int)>("mult_to_ibv_rate", "IBVERBS_1.0");
  check(from_mult(4) == IBV_RATE_10_GBPS, "mult_to_ibv_rate(4)");

  // Sysfs helpers ($SYSFS_PATH is set with a trailing slash).
  auto sysfs_path = sym<const char* (*)()>("ibv_get_sysfs_path", "IBVERBS_1.0");
  check(std::strcmp(sysfs_path(), "/tmp/softrdma-fake-sysfs") == 0,
        "ibv_get_sysfs_path honours $SYSFS_PATH");
  auto read_file =
      sym<int (*)(const char*, const char*, char*, size_t)>("ibv_read_sysfs_file", "IBVERBS_1.0");
  char buf[64];
  const std::string proc_dir = "/proc/" + std::to_string(getpid());
  check(read_file(proc_dir.c_str(), "comm", buf, sizeof(buf)) > 0 &&
            std::strcmp(buf, "abi_smoke") == 0,
        "ibv_read_sysfs_file reads <dir>/<file> without the newline");
  errno = 0;
  check(read_file("/nonexistent", "x", buf, sizeof(buf)) == -1 && errno == ENOENT,
        "ibv_read_sysfs_file fails with -1/ENOENT");
  auto read_ibdev = sym<int (*)(char*, size_t, void*, const char*, ...)>(
      "ibv_read_ibdev_sysfs_file", "IBVERBS_PRIVATE_34");
  check(read_ibdev(buf, sizeof(buf), nullptr, "%s", "node_guid") < 0,
        "ibv_read_ibdev_sysfs_file fails without a provider device");

  // Provider registration is accepted, the disassociate flag is data.
  sym<void (*)(const void*)>("verbs_register_driver_34", "IBVERBS_PRIVATE_34")(nullptr);
  sym<void (*)(const char*, void*)>("ibv_register_driver", "IBVERBS_1.1")("x", nullptr);
  check(true, "verbs_register_driver_34 and ibv_register_driver@IBVERBS_1.1 return");
  auto* allow = sym<bool*>("verbs_allow_disassociate_destroy", "IBVERBS_PRIVATE_34");
  check(*allow, "verbs_allow_disassociate_destroy set from $RDMAV_ALLOW_DISASSOC_DESTROY");

  // __verbs_log writes enabled levels to $VERBS_LOG_FILE.
  auto verbs_log =
      sym<void (*)(void*, uint32_t, const char*, ...)>("__verbs_log", "IBVERBS_PRIVATE_34");
  verbs_log(nullptr, 1, "smoke %s %d\n", "error", 1);
  verbs_log(nullptr, 4, "debug line that level 2 filters\n");
  const char* log_path = std::getenv("VERBS_LOG_FILE");
  std::stringstream text;
  if (log_path != nullptr) text << std::ifstream(log_path).rdbuf();
  check(text.str() == "smoke error 1\n", "__verbs_log writes level 1, filters level 4");

  // Provider-side commands and not-yet-implemented verbs fail cleanly.
  errno = 0;
  check(sym<int (*)(void*)>("ibv_cmd_dealloc_pd", "IBVERBS_PRIVATE_34")(nullptr) == EOPNOTSUPP,
        "ibv_cmd_dealloc_pd returns EOPNOTSUPP");
  errno = 0;
  check(sym<void* (*)(void*, void*)>("verbs_open_device", "IBVERBS_PRIVATE_34")(nullptr, nullptr) ==
                nullptr &&
            errno == EOPNOTSUPP,
        "verbs_open_device fails with NULL/EOPNOTSUPP");
  errno = 0;
  check(
      sym<void* (*)(void*, void*)>("ibv_create_srq", "IBVERBS_1.1")(nullptr, nullptr) == nullptr &&
          errno == EINVAL,
      "ibv_create_srq(NULL) fails with NULL/EINVAL");
  check(sym<int (*)(void*, void*)>("ibv_set_ece", "IBVERBS_1.10")(nullptr, nullptr) == EOPNOTSUPP,
        "ibv_set_ece returns EOPNOTSUPP");
  check(sym<int (*)(void*, int, uint32_t)>("ibv_query_qp_data_in_order", "IBVERBS_1.14")(nullptr, 0,
                                                                                         0) == 0,
        "ibv_query_qp_data_in_order answers 0");
  check(sym<int (*)(void*, size_t)>("ibv_dontfork_range", "IBVERBS_1.1")(buf, sizeof(buf)) == 0,
        "ibv_dontfork_range succeeds");

  std::printf("%s\n", failures == 0 ? "all checks passed" : "some checks FAILED");
  return failures == 0 ? 0 : 1;
}
