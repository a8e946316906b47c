// Each transport header's encoding against bytes written out by hand from
// the layouts of roce-wire.md §2 and §4 (big-endian, bit 7 = MSB), with
// every field at a distinct value so a field in the wrong place shows.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "wire/roce/headers.h"

namespace softrdma::roce {
namespace {

template <size_t N>
std::vector<uint8_t> V(const std::array<uint8_t, N>& a) {
  return {a.begin(), a.end()};
}

TEST(RoceHeaders, BthLayout) {
  const Bth bth{.opcode = 0x0A,
                .solicited = true,
                .mig_req = true,
                .pad_count = 2,
                .tver = 0,
                .pkey = 0x7FFF,
                .fecn = true,
                .becn = false,
                .dest_qp = 0xABCDEF,
                .ack_req = true,
                .psn = 0x123456};
  std::array<uint8_t, kBthSize> out{};
  EncodeBth(bth, out);
  EXPECT_EQ(V(out), (std::vector<uint8_t>{0x0A, 0xE0, 0x7F, 0xFF, 0x80, 0xAB, 0xCD, 0xEF, 0x80,
                                          0x12, 0x34, 0x56}));
  EXPECT_EQ(DecodeBth(out), bth);
  // Reserved bits (Resv6a, Resv7) are ignored on receive; TVer is read as is.
  out[4] |= 0x3F;
  out[8] |= 0x7F;
  out[1] |= 0x05;
  Bth decoded = DecodeBth(out);
  EXPECT_EQ(decoded.tver, 5);
  decoded.tver = 0;
  EXPECT_EQ(decoded, bth);
  // 24-bit fields are cut to 24 bits on encode.
  std::array<uint8_t, kBthSize> wide{};
  EncodeBth(Bth{.dest_qp = 0x1000001, .psn = 0xFF000002}, wide);
  EXPECT_EQ(DecodeBth(wide).dest_qp, 1u);
  EXPECT_EQ(DecodeBth(wide).psn, 2u);
}

TEST(RoceHeaders, RethLayout) {
  const Reth reth{.va = 0x0102030405060708, .rkey = 0x090A0B0C, .dma_length = 0x0D0E0F10};
  std::array<uint8_t, kRethSize> out{};
  EncodeReth(reth, out);
  EXPECT_EQ(V(out), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(DecodeReth(out), reth);
}

TEST(RoceHeaders, AethLayoutAndSyndromes) {
  const Aeth aeth{.syndrome = RnrNakSyndrome(14), .msn = 0x00BEEF};
  std::array<uint8_t, kAethSize> out{};
  EncodeAeth(aeth, out);
  EXPECT_EQ(V(out), (std::vector<uint8_t>{0x2E, 0x00, 0xBE, 0xEF}));
  EXPECT_EQ(DecodeAeth(out), aeth);
  EXPECT_EQ(AethTypeOf(0x2E), AethType::kRnrNak);
  EXPECT_EQ(AethValueOf(0x2E), 14);
  EXPECT_EQ(AethTypeOf(kAckNoCredits), AethType::kAck);
  EXPECT_EQ(AethTypeOf(kNakPsnSequenceError), AethType::kNak);
  EXPECT_EQ(AethValueOf(kNakRemoteOperationalError), 3);
  EXPECT_EQ(AethTypeOf(0x45), AethType::kReserved);
  EXPECT_EQ(AckSyndrome(5), 0x05);
  out[0] |= 0x80;  // reserved bit
  EXPECT_EQ(DecodeAeth(out), aeth);
}

TEST(RoceHeaders, AtomicEthIsPacked28Bytes) {
  const AtomicEth eth{.va = 0x1111111111111118,
                      .rkey = 0x22222222,
                      .swap_add = 0x3333333333333333,
                      .compare = 0x4444444444444444};
  std::array<uint8_t, kAtomicEthSize> out{};
  EncodeAtomicEth(eth, out);
  std::vector<uint8_t> expected;
  for (int i = 0; i < 7; ++i) expected.push_back(0x11);
  expected.push_back(0x18);
  for (int i = 0; i < 4; ++i) expected.push_back(0x22);
  for (int i = 0; i < 8; ++i) expected.push_back(0x33);
  for (int i = 0; i < 8; ++i) expected.push_back(0x44);
  EXPECT_EQ(V(out), expected);
  EXPECT_EQ(DecodeAtomicEth(out), eth);
}

TEST(RoceHeaders, AtomicAckDethRdethFethAndWords) {
  std::array<uint8_t, kAtomicAckEthSize> ack{};
  EncodeAtomicAckEth(AtomicAckEth{.original = 0x8000000000000001}, ack);
  EXPECT_EQ(V(ack), (std::vector<uint8_t>{0x80, 0, 0, 0, 0, 0, 0, 0x01}));
  EXPECT_EQ(DecodeAtomicAckEth(ack).original, 0x8000000000000001u);

  std::array<uint8_t, kDethSize> deth{};
  EncodeDeth(Deth{.qkey = kGsiQkey, .src_qp = 0x000001}, deth);
  EXPECT_EQ(V(deth), (std::vector<uint8_t>{0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}));
  deth[4] = 0xFF;  // reserved
  EXPECT_EQ(DecodeDeth(deth), (Deth{.qkey = kGsiQkey, .src_qp = 1}));

  std::array<uint8_t, kRdethSize> rdeth{};
  EncodeRdeth(Rdeth{.eecn = 0x0A0B0C}, rdeth);
  EXPECT_EQ(V(rdeth), (std::vector<uint8_t>{0x00, 0x0A, 0x0B, 0x0C}));
  EXPECT_EQ(DecodeRdeth(rdeth).eecn, 0x0A0B0Cu);

  std::array<uint8_t, kFethSize> feth{};
  EncodeFeth(Feth{.selectivity = 2, .placement = 0x9}, feth);
  EXPECT_EQ(V(feth), (std::vector<uint8_t>{0, 0, 0, 0x29}));
  EXPECT_EQ(DecodeFeth(feth), (Feth{.selectivity = 2, .placement = 9}));

  std::array<uint8_t, 4> word{};
  EncodeWord32(0xDEADBEEF, word);
  EXPECT_EQ(V(word), (std::vector<uint8_t>{0xDE, 0xAD, 0xBE, 0xEF}));
  EXPECT_EQ(DecodeWord32(word), 0xDEADBEEFu);
}

}  // namespace
}  // namespace softrdma::roce
