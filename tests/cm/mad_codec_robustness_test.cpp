// DecodeMad and DecodeCmaHeader on hostile input: random and mutated buffers
// of every length 0..300 must be refused or decoded, never crash (run it under
// SOFTRDMA_SANITIZE=address or undefined to also catch silent overreads), and
// whatever decodes must re-encode to bytes that decode to the same message.
// The fixed seed makes a failure reproducible; tests/fuzz/ has the
// coverage-guided version.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cm/mad_codec.h"
#include "cm_mad_samples.h"

namespace softrdma::cm {
namespace {

constexpr int kIterations = 20000;
constexpr size_t kMaxLength = 300;

struct Outcome {
  int mads_decoded = 0;
  int headers_decoded = 0;
};

// Checks the input the way the fuzz target does.
void Exercise(std::span<const uint8_t> bytes, Outcome& outcome) {
  DecodeError error{};
  if (std::optional<Mad> mad = DecodeMad(bytes, &error)) {
    ++outcome.mads_decoded;
    const auto again = samples::Encode(*mad);
    std::optional<Mad> back = DecodeMad(again);
    ASSERT_TRUE(back.has_value());
    ASSERT_TRUE(*back == *mad);
    ASSERT_EQ(samples::Encode(*back), again);
    // The private data of a REQ or SIDR_REQ starts with the IP header.
    if (const auto* req = std::get_if<ReqMsg>(&mad->message)) {
      if (DecodeCmaHeader(req->private_data)) ++outcome.headers_decoded;
    } else if (const auto* sidr = std::get_if<SidrReqMsg>(&mad->message)) {
      if (DecodeCmaHeader(sidr->private_data)) ++outcome.headers_decoded;
    }
  } else {
    ASSERT_LE(int(error), int(DecodeError::kUnknownAttribute));
  }
  if (std::optional<CmaHeader> header = DecodeCmaHeader(bytes)) {
    ++outcome.headers_decoded;
    std::array<uint8_t, kCmaHeaderSize> again{};
    EncodeCmaHeader(*header, again);
    std::optional<CmaHeader> back = DecodeCmaHeader(again);
    ASSERT_TRUE(back.has_value());
    ASSERT_TRUE(*back == *header);
  }
}

TEST(MadCodecRobustness, RandomAndMutatedBuffersNeverCrash) {
  std::mt19937_64 rng(0x5EED'C0DE);  // fixed: a failure must be reproducible
  auto below = [&](size_t n) { return size_t(rng() % n); };
  const std::array<Mad, 9> seeds = samples::OneOfEach();
  Outcome outcome;
  std::vector<uint8_t> buf;
  for (int i = 0; i < kIterations && !::testing::Test::HasFatalFailure(); ++i) {
    switch (i % 4) {
      case 0: {  // Random bytes of a random length.
        buf.resize(below(kMaxLength + 1));
        for (uint8_t& b : buf) b = uint8_t(rng());
        break;
      }
      case 1: {  // Random bytes behind a valid CM header, so the body decoders run.
        buf.resize(kMadSize);
        for (uint8_t& b : buf) b = uint8_t(rng());
        const auto valid = samples::Encode(seeds[below(seeds.size())]);
        std::copy(valid.begin(), valid.begin() + kMadHeaderSize, buf.begin());
        break;
      }
      case 2: {  // A valid MAD with a few bytes changed anywhere.
        const auto valid = samples::Encode(seeds[below(seeds.size())]);
        buf.assign(valid.begin(), valid.end());
        for (size_t n = 1 + below(4); n > 0; --n) buf[below(buf.size())] ^= uint8_t(1 + below(255));
        break;
      }
      case 3: {  // A valid MAD cut or extended; or its REQ IP header, mutated.
        const auto valid = samples::Encode(seeds[below(seeds.size())]);
        if (rng() & 1) {
          buf.assign(valid.begin(), valid.end());
          buf.resize(below(kMaxLength + 1), uint8_t(rng()));
        } else {
          const auto req = samples::Encode(seeds[0]);
          const size_t header = kMadHeaderSize + 140;  // REQ private data
          buf.assign(req.begin() + header, req.begin() + header + below(kCmaHeaderSize + 8));
          if (!buf.empty()) buf[below(buf.size())] ^= uint8_t(1 + below(255));
        }
        break;
      }
    }
    Exercise(buf, outcome);
  }
  // The mutations keep enough inputs valid for both decoders' success paths to
  // have run many times, not only their refusals.
  EXPECT_GT(outcome.mads_decoded, kIterations / 4);
  EXPECT_GT(outcome.headers_decoded, kIterations / 40);
}

}  // namespace
}  // namespace softrdma::cm
