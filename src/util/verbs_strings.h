// Human-readable names for the verbs enums that libibverbs turns into text
// (ibv_wc_status_str and friends). Kept here, free of any C ABI concerns, so
// the unit tests can check every value without loading libibverbs.so.1.
#pragma once

#include <infiniband/verbs.h>

namespace softrdma {

// Every function returns a pointer to a static string and never nullptr:
// callers print the result straight into log lines, so a value outside the
// enum (a newer kernel, a corrupted completion) must still give text.
const char* wc_status_str(ibv_wc_status status) noexcept;
const char* event_type_str(ibv_event_type event) noexcept;
const char* node_type_str(ibv_node_type node_type) noexcept;
const char* port_state_str(ibv_port_state port_state) noexcept;

// Returned for values that are not part of the enum.
inline constexpr const char* kUnknownEnumStr = "unknown";

}  // namespace softrdma
