// Environment switches of libibverbs that softrdma honours without a device
// behind them (the device-related ones live with the core).
#pragma once

namespace softrdma {

// Value for the exported verbs_allow_disassociate_destroy flag, from the two
// getenv() results. Same observable rules as rdma-core 44, so scripts written
// for it keep working: $RDMAV_ALLOW_DISASSOC_DESTROY turns the flag on by its
// mere presence (any value, even "0"); the legacy $MLX4_DEVICE_FATAL_CLEANUP
// turns it on for any value except "0".
constexpr bool allow_disassociate_destroy(const char* rdmav_value,
                                          const char* legacy_mlx4_value) noexcept {
  if (rdmav_value != nullptr) return true;
  if (legacy_mlx4_value == nullptr) return false;
  return !(legacy_mlx4_value[0] == '0' && legacy_mlx4_value[1] == '\0');
}

}  // namespace softrdma
