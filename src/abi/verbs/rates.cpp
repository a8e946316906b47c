// Exported ibv_rate conversions: thin C shims over util/verbs_rates.
#include <infiniband/verbs.h>

#include "abi/verbs/symver.h"
#include "util/verbs_rates.h"

extern "C" {

SOFTRDMA_EXPORT int ibv_rate_to_mult(enum ibv_rate rate) {
  return softrdma::rate_to_mult(rate);
}

SOFTRDMA_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
  return softrdma::mult_to_rate(mult);
}

SOFTRDMA_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate) {
  return softrdma::rate_to_mbps(rate);
}

SOFTRDMA_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
  return softrdma::mbps_to_rate(mbps);
}

}  // extern "C"
