// Writes the seed corpus of the MAD fuzz target (tests/fuzz/corpus/): the
// REQ of ib-cm.md §9 (its bytes are checked against the document by
// MadCodecWorkedExample.EncodesTheReqOfIbCmSection9ByteForByte), one MAD of
// each other message, and the two rdma_cm IP headers alone. The files are
// committed; rerun only when the samples change:
//   cmake --build BUILD --target cm_mad_fuzz_make_corpus
//   BUILD/bin/cm_mad_fuzz_make_corpus tests/fuzz/corpus
#include <cstdio>
#include <fstream>
#include <span>
#include <string>

#include "../cm/cm_mad_samples.h"

namespace {

bool Write(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace softrdma::cm;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const char* names[] = {"req_worked_example", "rep",     "rtu", "rej", "mra", "dreq", "drep",
                         "sidr_req",           "sidr_rep"};
  const auto mads = samples::OneOfEach();
  bool ok = true;
  for (size_t i = 0; i < mads.size(); ++i) {
    ok &= Write(dir + "/" + std::to_string(i) + "_" + names[i] + ".mad", samples::Encode(mads[i]));
  }
  const auto& req = std::get<ReqMsg>(mads[0].message);
  ok &= Write(dir + "/cma_header_ipv4.bin", std::span(req.private_data).first(kCmaHeaderSize));
  CmaHeader v6{.ip_version = 6, .src_port = 0x1F90};
  v6.src_ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a};
  v6.dst_ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14};
  std::array<uint8_t, kCmaHeaderSize> v6_bytes{};
  EncodeCmaHeader(v6, v6_bytes);
  ok &= Write(dir + "/cma_header_ipv6.bin", v6_bytes);
  if (!ok) {
    std::fprintf(stderr, "%s: cannot write into %s\n", argv[0], dir.c_str());
    return 1;
  }
  return 0;
}
