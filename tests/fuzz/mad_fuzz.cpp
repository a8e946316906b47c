// Fuzz target of the CM MAD codec (src/cm/mad_codec.h): whatever the bytes,
// DecodeMad and DecodeCmaHeader must refuse them or decode them without
// touching memory they do not own, and a decoded message must survive
// encode -> decode -> encode unchanged (decoding drops reserved bits, so the
// first re-encoding may differ from the input; from then on it is stable).
//
// Built with libFuzzer when the compiler is clang, else with the corpus
// driver mad_fuzz_driver.cpp: see CMakeLists.txt here.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "cm/mad_codec.h"

namespace {

using softrdma::cm::CmaHeader;
using softrdma::cm::DecodeCmaHeader;
using softrdma::cm::DecodeMad;
using softrdma::cm::EncodeCmaHeader;
using softrdma::cm::EncodeMad;
using softrdma::cm::kCmaHeaderSize;
using softrdma::cm::kMadSize;
using softrdma::cm::Mad;
using softrdma::cm::ReqMsg;
using softrdma::cm::SidrReqMsg;

// An invariant of the codec was broken: stop so the fuzzer saves the input.
[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "mad_fuzz: %s\n", what);
  std::abort();
}

void CheckCmaHeader(std::span<const uint8_t> bytes) {
  std::optional<CmaHeader> header = DecodeCmaHeader(bytes);
  if (!header) return;
  if (header->ip_version != 4 && header->ip_version != 6) Fail("accepted IP version");
  std::array<uint8_t, kCmaHeaderSize> again{};
  EncodeCmaHeader(*header, again);
  std::optional<CmaHeader> back = DecodeCmaHeader(again);
  if (!back) Fail("re-encoded IP header does not decode");
  if (!(*back == *header)) Fail("IP header changed by encode/decode");
  std::array<uint8_t, kCmaHeaderSize> third{};
  EncodeCmaHeader(*back, third);
  if (third != again) Fail("IP header encoding is not stable");
}

void CheckMad(std::span<const uint8_t> bytes) {
  std::optional<Mad> mad = DecodeMad(bytes);
  if (!mad) return;
  if (bytes.size() != kMadSize) Fail("accepted a MAD that is not 256 bytes");
  std::array<uint8_t, kMadSize> again{};
  EncodeMad(*mad, again);
  std::optional<Mad> back = DecodeMad(again);
  if (!back) Fail("re-encoded MAD does not decode");
  if (!(*back == *mad)) Fail("MAD changed by encode/decode");
  std::array<uint8_t, kMadSize> third{};
  EncodeMad(*back, third);
  if (third != again) Fail("MAD encoding is not stable");
  // What the CM does next with a REQ or SIDR_REQ: read the rdma_cm header.
  if (const auto* req = std::get_if<ReqMsg>(&mad->message)) CheckCmaHeader(req->private_data);
  if (const auto* sidr = std::get_if<SidrReqMsg>(&mad->message)) {
    CheckCmaHeader(sidr->private_data);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  CheckMad(bytes);
  CheckCmaHeader(bytes);
  return 0;
}
