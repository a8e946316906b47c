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

#include "../roce/roce_vectors.h"
#include "wire/roce/ip_datagram.h"

namespace {

using namespace softrdma::roce;

bool Write(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return bool(out);
}

size_t SampleLength(const OpcodeInfo& info) {
  switch (info.payload) {
    case PayloadRule::kNone:
      return 0;
    case PayloadRule::kFullMtu:
      return 256;
    case PayloadRule::kOneToMtu:
      return 13;
    case PayloadRule::kZeroToMtu:
      return 5;
    case PayloadRule::kExactly8:
      return 8;
  }
  return 0;
}

TransportHeaders SampleHeaders(const OpcodeInfo& info) {
  TransportHeaders h;
  h.bth = Bth{.opcode = info.opcode,
              .becn = info.service == TransportService::kCnp,
              .dest_qp = 0x12,
              .ack_req = info.ack_req == AckReqRule::kOnEnd && info.IsLastOfMessage(),
              .psn = 0x000100};
  h.rdeth.eecn = 0x7;
  h.deth = Deth{.qkey = kGsiQkey, .src_qp = 0x11};
  h.feth = Feth{.selectivity = 1, .placement = 1};
  h.reth = Reth{.va = 0x10000, .rkey = 0x1234, .dma_length = 4096};
  h.atomic_eth = AtomicEth{.va = 0x2000, .rkey = 0x99, .swap_add = 1, .compare = 2};
  h.imm_data = 0x01020304;
  h.invalidate_rkey = 0x4321;
  h.aeth = Aeth{.syndrome = kAckNoCredits, .msn = 3};
  h.atomic_ack.original = 42;
  return h;
}

NetworkHeaders SampleNet(uint8_t ip_version) {
  NetworkHeaders net;
  net.ip_version = ip_version;
  if (ip_version == 4) {
    const uint8_t a[4] = {192, 168, 1, 10}, b[4] = {192, 168, 1, 20};
    net.src_gid = Ipv4MappedGid(a);
    net.dst_gid = Ipv4MappedGid(b);
  } else {
    net.src_gid[0] = net.dst_gid[0] = 0xfd;
    net.src_gid[15] = 1;
    net.dst_gid[15] = 2;
  }
  net.udp_src_port = 0xC132;
  return net;
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
      const size_t length = SampleLength(info);
      std::vector<uint8_t> payload(length);
      for (size_t i = 0; i < length; ++i) payload[i] = uint8_t('a' + i % 26);
      std::vector<uint8_t> out(NetworkHeaderLength(version) + PacketLength(info, length));
      size_t written = 0;
      if (!EncodeDatagram(SampleNet(version), SampleHeaders(info), payload, out, &written).ok()) {
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
