#include "util/verbs_rates.h"

#include <array>

namespace softrdma {
namespace {

struct RateInfo {
  ibv_rate rate;
  int mult;  // -1: not an integral multiple of 2.5 Gbit/s
  int mbps;
};

// One row per enumerator of ibv_rate except IBV_RATE_MAX. The mbps column is
// the signalling data rate of the link width/speed the enumerator stands for
// (FDR lanes run at 14.0625 Gbit/s, EDR at 25.78125, HDR at 53.125, NDR at
// 106.25), which is why e.g. "100 Gbit/s" is 103125.
constexpr std::array<RateInfo, 23> kRates{{
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
}};

const RateInfo* find_rate(ibv_rate rate) noexcept {
  for (const RateInfo& info : kRates) {
    if (info.rate == rate) return &info;
  }
  return nullptr;
}

}  // namespace

int rate_to_mult(ibv_rate rate) noexcept {
  const RateInfo* info = find_rate(rate);
  return info != nullptr ? info->mult : -1;
}

ibv_rate mult_to_rate(int mult) noexcept {
  // -1 marks "no multiple" in the table and must not match a caller's -1.
  if (mult <= 0) return IBV_RATE_MAX;
  for (const RateInfo& info : kRates) {
    if (info.mult == mult) return info.rate;
  }
  return IBV_RATE_MAX;
}

int rate_to_mbps(ibv_rate rate) noexcept {
  const RateInfo* info = find_rate(rate);
  return info != nullptr ? info->mbps : -1;
}

ibv_rate mbps_to_rate(int mbps) noexcept {
  if (mbps <= 0) return IBV_RATE_MAX;
  for (const RateInfo& info : kRates) {
    if (info.mbps == mbps) return info.rate;
  }
  return IBV_RATE_MAX;
}

}  // namespace softrdma
