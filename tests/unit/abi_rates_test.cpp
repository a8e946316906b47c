// ibv_rate conversions behind ibv_rate_to_mult, mult_to_ibv_rate,
// ibv_rate_to_mbps and mbps_to_ibv_rate. Expected values are those of the
// installed rdma-core 44 library (measured), which clients were written
// against.
#include <gtest/gtest.h>

#include "util/verbs_rates.h"

namespace softrdma {
namespace {

struct Row {
  ibv_rate rate;
  int mult;
  int mbps;
};

constexpr Row kExpected[] = {
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
};

TEST(VerbsRates, EveryRateHasItsMultipleAndMbps) {
  for (const Row& row : kExpected) {
    EXPECT_EQ(rate_to_mult(row.rate), row.mult) << "rate enum " << row.rate;
    EXPECT_EQ(rate_to_mbps(row.rate), row.mbps) << "rate enum " << row.rate;
  }
}

TEST(VerbsRates, InversesMapBackToTheRate) {
  for (const Row& row : kExpected) {
    if (row.mult > 0) {
      EXPECT_EQ(mult_to_rate(row.mult), row.rate) << "mult " << row.mult;
    }
    EXPECT_EQ(mbps_to_rate(row.mbps), row.rate) << "mbps " << row.mbps;
  }
}

TEST(VerbsRates, RateMaxAndOutOfRangeHaveNoValue) {
  EXPECT_EQ(rate_to_mult(IBV_RATE_MAX), -1);
  EXPECT_EQ(rate_to_mbps(IBV_RATE_MAX), -1);
  EXPECT_EQ(rate_to_mult(static_cast<ibv_rate>(1)), -1);  // a gap in the enum
  EXPECT_EQ(rate_to_mbps(static_cast<ibv_rate>(1)), -1);
  EXPECT_EQ(rate_to_mult(static_cast<ibv_rate>(IBV_RATE_1200_GBPS + 1)), -1);
  EXPECT_EQ(rate_to_mbps(static_cast<ibv_rate>(-1)), -1);
}

TEST(VerbsRates, UnknownInputsGiveRateMax) {
  // Multiples that name no rate, including the FDR/EDR ones the forward
  // direction reports as -1, and the -1 marker itself.
  for (int mult : {-1, 0, 3, 5, 6, 22, 40, 45, 67, 1000}) {
    EXPECT_EQ(mult_to_rate(mult), IBV_RATE_MAX) << "mult " << mult;
  }
  // Only the exact data rates convert back; nominal link speeds do not.
  for (int mbps : {-1, 0, 1, 14000, 25000, 50000, 100000, 200000, 2499}) {
    EXPECT_EQ(mbps_to_rate(mbps), IBV_RATE_MAX) << "mbps " << mbps;
  }
}

}  // namespace
}  // namespace softrdma
