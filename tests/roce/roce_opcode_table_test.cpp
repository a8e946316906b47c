// The opcode table against roce-wire.md §3, written out here a second time
// in the document's own terms (header names in wire order, payload rule,
// position), so a wrong row in src/wire/roce/opcode_table.cpp shows up as a
// difference from the document rather than agreeing with itself.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "wire/roce/opcode_table.h"

namespace softrdma::roce {
namespace {

struct Expected {
  const char* headers;  // extension headers after the BTH, wire order
  const char* payload;  // "none", "PMTU", "1..PMTU", "0..PMTU", "8"
  char position;        // F, M, L, O
};

// roce-wire.md §3.1 (RC), §3.2 (UC), §3.3 (UD), §3.4 (CNP, RD).
const std::map<int, Expected> kDocument = {
    {0x00, {"", "PMTU", 'F'}},
    {0x01, {"", "PMTU", 'M'}},
    {0x02, {"", "1..PMTU", 'L'}},
    {0x03, {"ImmDt", "1..PMTU", 'L'}},
    {0x04, {"", "0..PMTU", 'O'}},
    {0x05, {"ImmDt", "0..PMTU", 'O'}},
    {0x06, {"RETH", "PMTU", 'F'}},
    {0x07, {"", "PMTU", 'M'}},
    {0x08, {"", "1..PMTU", 'L'}},
    {0x09, {"ImmDt", "1..PMTU", 'L'}},
    {0x0A, {"RETH", "0..PMTU", 'O'}},
    {0x0B, {"RETH ImmDt", "0..PMTU", 'O'}},
    {0x0C, {"RETH", "none", 'O'}},
    {0x0D, {"AETH", "PMTU", 'F'}},
    {0x0E, {"", "PMTU", 'M'}},
    {0x0F, {"AETH", "1..PMTU", 'L'}},
    {0x10, {"AETH", "0..PMTU", 'O'}},
    {0x11, {"AETH", "none", 'O'}},
    {0x12, {"AETH AtomicAckETH", "none", 'O'}},
    {0x13, {"AtomicETH", "none", 'O'}},
    {0x14, {"AtomicETH", "none", 'O'}},
    {0x16, {"IETH", "1..PMTU", 'L'}},
    {0x17, {"IETH", "0..PMTU", 'O'}},
    {0x1C, {"FETH RETH", "none", 'O'}},
    {0x1D, {"RETH", "8", 'O'}},
    {0x64, {"DETH", "0..PMTU", 'O'}},
    {0x65, {"DETH ImmDt", "0..PMTU", 'O'}},
    {0x81, {"CNP", "none", 'O'}},
};

std::string HeadersOf(const OpcodeInfo& info) {
  std::string names;
  for (unsigned i = 0; i < kHeaderKinds; ++i) {
    const auto bit = HeaderBit(1u << i);
    if (!info.Has(bit)) continue;
    if (!names.empty()) names += ' ';
    names += HeaderName(bit);
  }
  return names;
}

std::string PayloadOf(const OpcodeInfo& info) {
  switch (info.payload) {
    case PayloadRule::kNone:
      return "none";
    case PayloadRule::kFullMtu:
      return "PMTU";
    case PayloadRule::kOneToMtu:
      return "1..PMTU";
    case PayloadRule::kZeroToMtu:
      return "0..PMTU";
    case PayloadRule::kExactly8:
      return "8";
  }
  return "?";
}

char PositionOf(const OpcodeInfo& info) {
  return "FMLO"[int(info.position)];
}

TEST(RoceOpcodeTable, RcUdAndCnpRowsMatchTheDocument) {
  for (const auto& [opcode, expected] : kDocument) {
    const OpcodeInfo* info = FindOpcode(uint8_t(opcode));
    ASSERT_NE(info, nullptr) << std::hex << opcode;
    EXPECT_EQ(HeadersOf(*info), expected.headers) << info->name;
    EXPECT_EQ(PayloadOf(*info), expected.payload) << info->name;
    EXPECT_EQ(PositionOf(*info), expected.position) << info->name;
  }
}

// §3.2: UC 0x20-0x2B are RC 0x00-0x0B with the same headers.
TEST(RoceOpcodeTable, UcRowsAreTheRcSendAndWriteRows) {
  for (int op = 0x00; op <= 0x0B; ++op) {
    const OpcodeInfo* rc = FindOpcode(uint8_t(op));
    const OpcodeInfo* uc = FindOpcode(uint8_t(0x20 | op));
    ASSERT_NE(uc, nullptr) << std::hex << (0x20 | op);
    EXPECT_EQ(uc->service, TransportService::kUc);
    EXPECT_EQ(HeadersOf(*uc), HeadersOf(*rc)) << uc->name;
    EXPECT_EQ(uc->payload, rc->payload) << uc->name;
    EXPECT_EQ(uc->position, rc->position) << uc->name;
    EXPECT_EQ(uc->ack_req, AckReqRule::kNever) << uc->name;
  }
}

// RD (rxe's table): requests carry RDETH + DETH first, responses RDETH.
TEST(RoceOpcodeTable, RdRowsPutRdethAndDethFirst) {
  for (int op = 0x00; op <= 0x14; ++op) {
    const OpcodeInfo* rc = FindOpcode(uint8_t(op));
    const OpcodeInfo* rd = FindOpcode(uint8_t(0x40 | op));
    ASSERT_NE(rd, nullptr) << std::hex << (0x40 | op);
    const std::string prefix = rc->is_request ? "RDETH DETH" : "RDETH";
    const std::string rest = HeadersOf(*rc);
    EXPECT_EQ(HeadersOf(*rd), rest.empty() ? prefix : prefix + " " + rest) << rd->name;
  }
}

TEST(RoceOpcodeTable, EveryOtherOpcodeIsUnknown) {
  int known = 0;
  for (int op = 0; op < 256; ++op) {
    const bool rc_uc_rd_ud_cnp =
        kDocument.count(op) != 0 || (op >= 0x20 && op <= 0x2B) || (op >= 0x40 && op <= 0x54);
    EXPECT_EQ(FindOpcode(uint8_t(op)) != nullptr, rc_uc_rd_ud_cnp) << std::hex << op;
    known += rc_uc_rd_ud_cnp;
  }
  EXPECT_EQ(size_t(known), AllOpcodes().size());
  // XRC, RD RESYNC and reserved codes are refused.
  EXPECT_EQ(FindOpcode(0x15), nullptr);
  EXPECT_EQ(FindOpcode(0x55), nullptr);
  EXPECT_EQ(FindOpcode(0xA4), nullptr);
}

// Offsets from the start of the BTH, as in rxe's table (roce-wire.md §3 sources).
TEST(RoceOpcodeTable, HeaderOffsetsFollowTheWireOrder) {
  EXPECT_EQ(FindOpcode(0x0B)->OffsetOf(kRethBit), 12u);
  EXPECT_EQ(FindOpcode(0x0B)->OffsetOf(kImmDtBit), 28u);
  EXPECT_EQ(FindOpcode(0x12)->OffsetOf(kAethBit), 12u);
  EXPECT_EQ(FindOpcode(0x12)->OffsetOf(kAtomicAckEthBit), 16u);
  EXPECT_EQ(FindOpcode(0x1C)->OffsetOf(kFethBit), 12u);
  EXPECT_EQ(FindOpcode(0x1C)->OffsetOf(kRethBit), 16u);
  EXPECT_EQ(FindOpcode(0x65)->OffsetOf(kDethBit), 12u);
  EXPECT_EQ(FindOpcode(0x65)->OffsetOf(kImmDtBit), 20u);
  EXPECT_EQ(FindOpcode(0x4B)->OffsetOf(kRdethBit), 12u);
  EXPECT_EQ(FindOpcode(0x4B)->OffsetOf(kDethBit), 16u);
  EXPECT_EQ(FindOpcode(0x4B)->OffsetOf(kRethBit), 24u);
  EXPECT_EQ(FindOpcode(0x4B)->OffsetOf(kImmDtBit), 40u);
  EXPECT_EQ(FindOpcode(0x4B)->header_length, 44u);
  for (const OpcodeInfo& info : AllOpcodes()) {
    size_t end = 12;
    for (unsigned i = 0; i < kHeaderKinds; ++i) {
      const auto bit = HeaderBit(1u << i);
      if (info.Has(bit)) end = info.OffsetOf(bit) + HeaderSize(bit);
    }
    EXPECT_EQ(info.header_length, end) << info.name;
    EXPECT_EQ(info.header_length % 4, 0u) << info.name;
  }
}

// rc-transport.md §3.1 (AckReq), §4.1 step 4 and roce-wire.md §3.1 notes
// (receive WQEs), responses vs requests.
TEST(RoceOpcodeTable, AckReqRequestAndReceiveWqeSemantics) {
  for (const OpcodeInfo& info : AllOpcodes()) {
    const bool response = info.operation == Operation::kRdmaReadResponse ||
                          info.operation == Operation::kAcknowledge ||
                          info.operation == Operation::kAtomicAcknowledge;
    EXPECT_EQ(info.is_request, !response && info.service != TransportService::kCnp) << info.name;
    const bool reliable =
        info.service == TransportService::kRc || info.service == TransportService::kRd;
    EXPECT_EQ(info.ack_req == AckReqRule::kOnEnd, reliable && info.is_request) << info.name;
  }
  const int takes[] = {0x00, 0x04, 0x05, 0x09, 0x0B, 0x17, 0x20, 0x24, 0x25,
                       0x29, 0x2B, 0x40, 0x44, 0x45, 0x49, 0x4B, 0x64, 0x65};
  const int completes[] = {0x02, 0x03, 0x04, 0x05, 0x09, 0x0B, 0x16, 0x17, 0x22, 0x23, 0x24,
                           0x25, 0x29, 0x2B, 0x42, 0x43, 0x44, 0x45, 0x49, 0x4B, 0x64, 0x65};
  for (const OpcodeInfo& info : AllOpcodes()) {
    EXPECT_EQ(info.takes_recv_wqe,
              std::find(std::begin(takes), std::end(takes), info.opcode) != std::end(takes))
        << info.name;
    EXPECT_EQ(info.completes_recv_wqe, std::find(std::begin(completes), std::end(completes),
                                                 info.opcode) != std::end(completes))
        << info.name;
  }
  EXPECT_TRUE(FindOpcode(0x0C)->IsFirstOfMessage() && FindOpcode(0x0C)->IsLastOfMessage());
  EXPECT_FALSE(FindOpcode(0x01)->IsFirstOfMessage() || FindOpcode(0x01)->IsLastOfMessage());
}

}  // namespace
}  // namespace softrdma::roce
