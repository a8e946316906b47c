// Transport header encodings (roce-wire.md §2 and §4). Byte offsets in the
// comments are from the start of each header.
#include "wire/roce/headers.h"

#include <algorithm>

#include "util/big_endian.h"

namespace softrdma::roce {

void EncodeBth(const Bth& bth, std::span<uint8_t, kBthSize> out) {
  out[0] = bth.opcode;
  // Byte 1: SE(7) M(6) PadCnt(5-4) TVer(3-0).
  out[1] = uint8_t((bth.solicited ? 0x80 : 0) | (bth.mig_req ? 0x40 : 0) |
                   ((bth.pad_count & 0x3) << 4) | (bth.tver & 0xF));
  StoreBe(out, 2, 2, bth.pkey);
  // Byte 4: FECN(7) BECN(6), Resv6a transmitted as 0.
  out[4] = uint8_t((bth.fecn ? 0x80 : 0) | (bth.becn ? 0x40 : 0));
  StoreBe(out, 5, 3, bth.dest_qp & kPsnMask);
  // Byte 8: AckReq(7), Resv7 transmitted as 0.
  out[8] = bth.ack_req ? 0x80 : 0;
  StoreBe(out, 9, 3, bth.psn & kPsnMask);
}

Bth DecodeBth(std::span<const uint8_t, kBthSize> in) {
  Bth bth;
  bth.opcode = in[0];
  bth.solicited = (in[1] & 0x80) != 0;
  bth.mig_req = (in[1] & 0x40) != 0;
  bth.pad_count = (in[1] >> 4) & 0x3;
  bth.tver = in[1] & 0xF;
  bth.pkey = uint16_t(LoadBe(in, 2, 2));
  bth.fecn = (in[4] & 0x80) != 0;
  bth.becn = (in[4] & 0x40) != 0;
  bth.dest_qp = uint32_t(LoadBe(in, 5, 3));
  bth.ack_req = (in[8] & 0x80) != 0;
  bth.psn = uint32_t(LoadBe(in, 9, 3));
  return bth;
}

void EncodeReth(const Reth& reth, std::span<uint8_t, kRethSize> out) {
  StoreBe(out, 0, 8, reth.va);
  StoreBe(out, 8, 4, reth.rkey);
  StoreBe(out, 12, 4, reth.dma_length);
}

Reth DecodeReth(std::span<const uint8_t, kRethSize> in) {
  return Reth{.va = LoadBe(in, 0, 8),
              .rkey = uint32_t(LoadBe(in, 8, 4)),
              .dma_length = uint32_t(LoadBe(in, 12, 4))};
}

void EncodeAeth(const Aeth& aeth, std::span<uint8_t, kAethSize> out) {
  out[0] = aeth.syndrome & 0x7F;  // bit 7 reserved
  StoreBe(out, 1, 3, aeth.msn & kPsnMask);
}

Aeth DecodeAeth(std::span<const uint8_t, kAethSize> in) {
  return Aeth{.syndrome = uint8_t(in[0] & 0x7F), .msn = uint32_t(LoadBe(in, 1, 3))};
}

void EncodeAtomicEth(const AtomicEth& eth, std::span<uint8_t, kAtomicEthSize> out) {
  StoreBe(out, 0, 8, eth.va);
  StoreBe(out, 8, 4, eth.rkey);
  StoreBe(out, 12, 8, eth.swap_add);
  StoreBe(out, 20, 8, eth.compare);
}

AtomicEth DecodeAtomicEth(std::span<const uint8_t, kAtomicEthSize> in) {
  return AtomicEth{.va = LoadBe(in, 0, 8),
                   .rkey = uint32_t(LoadBe(in, 8, 4)),
                   .swap_add = LoadBe(in, 12, 8),
                   .compare = LoadBe(in, 20, 8)};
}

void EncodeAtomicAckEth(const AtomicAckEth& eth, std::span<uint8_t, kAtomicAckEthSize> out) {
  StoreBe(out, 0, 8, eth.original);
}

AtomicAckEth DecodeAtomicAckEth(std::span<const uint8_t, kAtomicAckEthSize> in) {
  return AtomicAckEth{.original = LoadBe(in, 0, 8)};
}

void EncodeDeth(const Deth& deth, std::span<uint8_t, kDethSize> out) {
  StoreBe(out, 0, 4, deth.qkey);
  out[4] = 0;  // reserved
  StoreBe(out, 5, 3, deth.src_qp & kPsnMask);
}

Deth DecodeDeth(std::span<const uint8_t, kDethSize> in) {
  return Deth{.qkey = uint32_t(LoadBe(in, 0, 4)), .src_qp = uint32_t(LoadBe(in, 5, 3))};
}

void EncodeRdeth(const Rdeth& rdeth, std::span<uint8_t, kRdethSize> out) {
  out[0] = 0;  // reserved
  StoreBe(out, 1, 3, rdeth.eecn & kPsnMask);
}

Rdeth DecodeRdeth(std::span<const uint8_t, kRdethSize> in) {
  return Rdeth{.eecn = uint32_t(LoadBe(in, 1, 3))};
}

void EncodeFeth(const Feth& feth, std::span<uint8_t, kFethSize> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  out[3] = uint8_t(((feth.selectivity & 0x3) << 4) | (feth.placement & 0xF));
}

Feth DecodeFeth(std::span<const uint8_t, kFethSize> in) {
  return Feth{.selectivity = uint8_t((in[3] >> 4) & 0x3), .placement = uint8_t(in[3] & 0xF)};
}

void EncodeWord32(uint32_t value, std::span<uint8_t, 4> out) {
  StoreBe(out, 0, 4, value);
}

uint32_t DecodeWord32(std::span<const uint8_t, 4> in) {
  return uint32_t(LoadBe(in, 0, 4));
}

}  // namespace softrdma::roce
