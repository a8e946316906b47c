// Fuzz target of the IPv4 identification solver behind the ICRC check
// (src/wire/roce/icrc.h): a UDP socket does not show a datagram's IP ID, so
// the receiver recovers it from the difference between the ICRC received
// and the one of ID 0 (FindIpv4IdForIcrcDelta), and a sender fixes GSO
// segments' ICRCs with Ipv4IdIcrcDelta. For any transport packet (the
// input after its first 6 bytes) and any ID (its first 2 bytes):
//  - the delta between the ICRCs of that ID and of ID 0 is Ipv4IdIcrcDelta,
//    and the solver finds exactly that ID in it;
//  - VerifyIcrcAnyIpv4Id accepts the packet sealed under that ID, with or
//    without the right likely_id;
//  - for an arbitrary delta (bytes 2..5), whatever ID the solver names has
//    that delta, and a packet whose ICRC is changed by a delta that is no
//    ID's is refused with EILSEQ.
//
// Built with libFuzzer when the compiler is clang, else with the corpus
// driver fuzz_driver.cpp: see CMakeLists.txt here.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/roce/headers.h"
#include "wire/roce/icrc.h"
#include "wire/roce/packet.h"

namespace {

using namespace softrdma::roce;

[[noreturn]] void Fail(const char* what, unsigned id, size_t length) {
  std::fprintf(stderr, "roce_icrc_id_fuzz: %s (ID %u, %zu transport bytes)\n", what, id, length);
  std::abort();
}

// `transport` followed by its ICRC inside `net`, XORed with `change`.
std::vector<uint8_t> Sealed(const NetworkHeaders& net, std::span<const uint8_t> transport,
                            uint32_t change) {
  std::vector<uint8_t> out(transport.begin(), transport.end());
  out.resize(transport.size() + kIcrcSize);
  StoreIcrc(ComputeIcrc(net, transport) ^ change,
            std::span<uint8_t, kIcrcSize>(out.data() + transport.size(), kIcrcSize));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6 + kBthSize) return 0;
  const auto id = static_cast<uint16_t>(data[0] << 8 | data[1]);
  const uint32_t any_delta =
      uint32_t{data[2]} << 24 | uint32_t{data[3]} << 16 | uint32_t{data[4]} << 8 | data[5];
  const std::span<const uint8_t> transport(data + 6, size - 6);
  const size_t length = transport.size();
  NetworkHeaders net;  // IPv4, ID 0
  net.src_gid[10] = net.src_gid[11] = net.dst_gid[10] = net.dst_gid[11] = 0xFF;
  net.src_gid[12] = net.dst_gid[12] = 127;
  net.src_gid[15] = net.dst_gid[15] = 1;
  NetworkHeaders with_id = net;
  with_id.ipv4_identification = id;

  const uint32_t delta = ComputeIcrc(net, transport) ^ ComputeIcrc(with_id, transport);
  if (delta != Ipv4IdIcrcDelta(id, length))
    Fail("Ipv4IdIcrcDelta differs from the ICRCs", id, length);
  const int found = FindIpv4IdForIcrcDelta(delta, length);
  if (id == 0 ? found != -1 : found != id) Fail("the solver did not find the ID", id, length);

  const std::vector<uint8_t> sent = Sealed(with_id, transport, 0);
  if (!VerifyIcrcAnyIpv4Id(net, sent).ok()) Fail("a packet of this ID was refused", id, length);
  if (!VerifyIcrcAnyIpv4Id(net, sent, id).ok()) Fail("refused with its likely_id", id, length);

  const int named = FindIpv4IdForIcrcDelta(any_delta, length);
  if (named == 0 || named > 0xFFFF) Fail("the solver named ID 0 or above 65535", id, length);
  if (named > 0 && Ipv4IdIcrcDelta(static_cast<uint16_t>(named), length) != any_delta)
    Fail("the solver named an ID of another delta", static_cast<unsigned>(named), length);
  if (named < 0 && any_delta != 0) {
    const softrdma::Status refused = VerifyIcrcAnyIpv4Id(net, Sealed(net, transport, any_delta));
    if (refused.ok() || refused.code() != EILSEQ) Fail("a corrupted ICRC was accepted", id, length);
  }
  return 0;
}
