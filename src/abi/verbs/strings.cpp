// Exported enum-to-text helpers: thin C shims over util/verbs_strings.
#include <infiniband/verbs.h>

#include "abi/verbs/symver.h"
#include "util/verbs_strings.h"

extern "C" {

SOFTRDMA_EXPORT const char* ibv_wc_status_str(enum ibv_wc_status status) {
  return softrdma::wc_status_str(status);
}

SOFTRDMA_EXPORT const char* ibv_event_type_str(enum ibv_event_type event) {
  return softrdma::event_type_str(event);
}

SOFTRDMA_EXPORT const char* ibv_node_type_str(enum ibv_node_type node_type) {
  return softrdma::node_type_str(node_type);
}

SOFTRDMA_EXPORT const char* ibv_port_state_str(enum ibv_port_state port_state) {
  return softrdma::port_state_str(port_state);
}

}  // extern "C"
