// Fuzz target of the RoCEv2 packet parser (src/wire/roce): whatever the
// bytes, ParseDatagram, ParsePacket and ParseTransport must refuse them or
// return views that lie inside them, and whatever they accept must survive
// encode -> parse -> encode unchanged (parsing drops reserved bits, so the
// first re-encoding may differ from the input; from then on it is stable).
// The input is read twice: as an IP datagram (IP, UDP, transport, ICRC) and
// as a bare UDP payload, so mutations that break the ICRC still reach the
// header parsers.
//
// Built with libFuzzer when the compiler is clang, else with the corpus
// driver fuzz_driver.cpp: see CMakeLists.txt here.
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/roce/ip_datagram.h"
#include "wire/roce/packet.h"

namespace {

using namespace softrdma::roce;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "roce_packet_fuzz: %s\n", what);
  std::abort();
}

bool Inside(std::span<const uint8_t> inner, std::span<const uint8_t> outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

void CheckView(const PacketView& view, std::span<const uint8_t> bytes) {
  if (view.info == nullptr || view.info->opcode != view.headers.bth.opcode) Fail("opcode row");
  if (!Inside(view.payload, bytes)) Fail("payload outside the input");
  if (view.payload.size() > kMaxPayload) Fail("payload above 4096 bytes");
  if (view.headers.bth.pad_count != PadCount(view.payload.size())) Fail("pad count accepted");
  if (view.headers.bth.tver != 0) Fail("transport version accepted");
  if (PacketLength(*view.info, view.payload.size()) != bytes.size()) Fail("length mismatch");
}

// Encodes a parsed packet, parses the result, encodes again: same headers,
// same payload, same bytes.
void CheckRoundTrip(const NetworkHeaders& net, const PacketView& view) {
  std::vector<uint8_t> again(PacketLength(*view.info, view.payload.size()));
  size_t written = 0;
  if (!EncodePacket(net, view.headers, view.payload, again, &written).ok()) {
    Fail("accepted packet does not encode");
  }
  PacketView back;
  if (!ParsePacket(net, again, &back).ok()) Fail("re-encoded packet does not parse");
  if (!(back.headers == view.headers) || back.info != view.info) Fail("headers changed");
  if (!std::equal(back.payload.begin(), back.payload.end(), view.payload.begin(),
                  view.payload.end())) {
    Fail("payload changed");
  }
  std::vector<uint8_t> third(again.size());
  if (!EncodePacket(net, back.headers, back.payload, third, &written).ok() || third != again) {
    Fail("packet encoding is not stable");
  }
}

void CheckDatagram(std::span<const uint8_t> bytes) {
  DatagramView datagram;
  if (!ParseDatagram(bytes, &datagram).ok()) return;
  if (!Inside(datagram.udp_payload, bytes)) Fail("UDP payload outside the input");
  PacketView view;
  if (!ParsePacket(datagram.net, datagram.udp_payload, &view).ok()) return;
  CheckView(view, datagram.udp_payload);
  CheckRoundTrip(datagram.net, view);
  // The whole datagram re-encodes and parses back to the same network fields.
  std::vector<uint8_t> again(NetworkHeaderLength(datagram.net.ip_version) +
                             datagram.udp_payload.size());
  size_t written = 0;
  if (!EncodeDatagram(datagram.net, view.headers, view.payload, again, &written).ok()) {
    Fail("accepted datagram does not encode");
  }
  DatagramView back;
  if (!ParseDatagram(again, &back).ok() || !(back.net == datagram.net)) {
    Fail("re-encoded datagram does not parse to the same IP/UDP fields");
  }
}

void CheckTransport(std::span<const uint8_t> bytes) {
  PacketView view;
  if (!ParseTransport(bytes, &view).ok()) return;
  CheckView(view, bytes);
  CheckRoundTrip(NetworkHeaders{}, view);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  CheckDatagram(bytes);
  CheckTransport(bytes);
  return 0;
}
