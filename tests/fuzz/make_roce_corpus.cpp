// Writes the seed corpus of the RoCEv2 packet fuzz target
// (tests/fuzz/roce_corpus/): the four datagrams of roce-wire.md §8 (checked
// byte for byte by tests/roce/roce_vectors_test.cpp), then one IPv4 datagram
// of every opcode of the table and a few over IPv6. The files are committed;
// rerun only when the samples change:
//   cmake --build BUILD --target roce_packet_fuzz_make_corpus
//   BUILD/bin/roce_packet_fuzz_make_corpus tests/fuzz/roce_corpus
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "../roce/roce_samples.h"
#include "../roce/roce_vectors.h"
#include "wire/roce/ip_datagram.h"

namespace {

using namespace softrdma::roce;

bool Write(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  ok &= Write(dir + "/vector_a.ip", vectors::Datagram(vectors::kVectorA));
  ok &= Write(dir + "/vector_b.ip", vectors::Datagram(vectors::kVectorB));
  ok &= Write(dir + "/vector_c.ip", vectors::Datagram(vectors::kVectorC));
  ok &= Write(dir + "/vector_d.ip", vectors::Datagram(vectors::kVectorD));
  for (const OpcodeInfo& info : AllOpcodes()) {
    for (uint8_t version : {uint8_t{4}, uint8_t{6}}) {
      // IPv6 only for a few, to keep the corpus small.
      if (version == 6 && info.opcode != 0x04 && info.opcode != 0x11 && info.opcode != 0x65) {
        continue;
      }
      const size_t length = samples::PayloadLength(info, 256);
      std::vector<uint8_t> payload(length);
      for (size_t i = 0; i < length; ++i) payload[i] = uint8_t('a' + i % 26);
      std::vector<uint8_t> out(NetworkHeaderLength(version) + PacketLength(info, length));
      size_t written = 0;
      if (!EncodeDatagram(samples::Net(version), samples::Headers(info, 0x100), payload, out,
                          &written)
               .ok()) {
        std::fprintf(stderr, "%s: cannot encode opcode 0x%02x\n", argv[0], info.opcode);
        return 1;
      }
      char name[64];
      std::snprintf(name, sizeof name, "/op_%02x_v%u.ip", info.opcode, version);
      ok &= Write(dir + name, out);
    }
  }
  if (!ok) {
    std::fprintf(stderr, "%s: cannot write into %s\n", argv[0], dir.c_str());
    return 1;
  }
  return 0;
}
