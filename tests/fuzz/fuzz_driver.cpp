// Runs the body of a libFuzzer target (mad_fuzz.cpp, roce_packet_fuzz.cpp: it
// is linked with one) without libFuzzer, for compilers that have none (GCC,
// the CI compiler): every file of the corpus
// directory given as argv[1], then 5000 (or argv[2]) deterministic mutations
// of each (byte flips, random bytes, cut and extended lengths), so the
// target's checks run on every build even though only clang can guide the
// search.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr int kDefaultMutationsPerFile = 5000;

// splitmix64: small, and the same sequence on every platform (unlike the
// standard distributions), so a failing mutation number reproduces.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : size_t(Next() % n); }
};

std::vector<uint8_t> Mutate(const std::vector<uint8_t>& seed, Rng& rng) {
  std::vector<uint8_t> out = seed;
  switch (rng.Below(5)) {
    case 0:  // Flip a few bits; the header usually stays valid, so the
    case 1:  // decoders behind it see most of these.
      for (size_t n = 1 + rng.Below(8); n > 0 && !out.empty(); --n) {
        out[rng.Below(out.size())] ^= uint8_t(1u << rng.Below(8));
      }
      break;
    case 2:  // Overwrite a run of bytes at random.
      if (!out.empty()) {
        const size_t at = rng.Below(out.size());
        const size_t end = std::min(out.size(), at + 1 + rng.Below(32));
        for (size_t i = at; i < end; ++i) out[i] = uint8_t(rng.Next());
      }
      break;
    case 3:  // Cut or extend (size checks, short headers).
      out.resize(rng.Below(300 + 1), uint8_t(rng.Next()));
      break;
    case 4:  // Corrupt one of the first 24 bytes (MAD header; IP and UDP header).
      if (!out.empty()) out[rng.Below(out.size() < 24 ? out.size() : 24)] = uint8_t(rng.Next());
      break;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS_PER_FILE]\n", argv[0]);
    return 2;
  }
  const int mutations = argc == 3 ? std::atoi(argv[2]) : kDefaultMutationsPerFile;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s: no corpus files in %s\n", argv[0], argv[1]);
    return 1;
  }
  std::sort(files.begin(), files.end());  // directory order is not deterministic
  uint64_t runs = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f], std::ios::binary);
    const std::vector<uint8_t> seed{std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(seed.data(), seed.size());
    Rng rng{0xC0FFEE00 + f};
    for (int i = 0; i < mutations; ++i) {
      const std::vector<uint8_t> input = Mutate(seed, rng);
      LLVMFuzzerTestOneInput(input.data(), input.size());
    }
    runs += 1 + static_cast<uint64_t>(mutations);
  }
  std::printf("%s: %zu corpus files, %llu inputs, no failure\n", argv[0], files.size(),
              static_cast<unsigned long long>(runs));
  return 0;
}
