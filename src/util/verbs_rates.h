// Conversions between enum ibv_rate, multiples of the 2.5 Gbit/s base rate and
// Mbit/s, as exported by libibverbs (ibv_rate_to_mult and friends).
#pragma once

#include <infiniband/verbs.h>

namespace softrdma {

// Multiple of 2.5 Gbit/s for `rate`, or -1 when the rate has none. The FDR/EDR
// rates (14, 25, 56, 100, 112, 168, 200, 300 Gbit/s) answer -1: rdma-core 44
// does so (measured on the installed library) and clients may rely on it.
int rate_to_mult(ibv_rate rate) noexcept;

// Inverse of rate_to_mult; IBV_RATE_MAX for a multiple that names no rate.
ibv_rate mult_to_rate(int mult) noexcept;

// Exact signalling data rate of `rate` in Mbit/s (e.g. 14062 for FDR 1x), or
// -1 for IBV_RATE_MAX and values outside the enum.
int rate_to_mbps(ibv_rate rate) noexcept;

// Inverse of rate_to_mbps: only the exact values it returns map back to a
// rate (25000 is not EDR 1x, 25781 is); anything else gives IBV_RATE_MAX.
ibv_rate mbps_to_rate(int mbps) noexcept;

}  // namespace softrdma
