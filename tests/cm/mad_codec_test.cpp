// CM MAD codec (cm/mad_codec.h) against the layouts of docs/ib-cm.md:
// the worked example of §9 byte for byte, every bitfield's mask of §3, the
// byte positions of each message's fields, round trips and every DecodeError.
#include "cm/mad_codec.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cm_mad_samples.h"

namespace softrdma::cm {
namespace {

using samples::Encode;
using MadBytes = std::array<uint8_t, kMadSize>;

// The 256-byte MAD listed in ib-cm.md §9, typed from the document.
// clang-format off
constexpr MadBytes kWorkedExampleReq = {
    0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78,  // 0000
    0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x00,  // 0010
    0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x1d, 0x2f, 0x02, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01,  // 0020
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x01, 0x00, 0x00, 0x00, 0x01,  // 0030
    0x00, 0x00, 0x00, 0xa1, 0xab, 0xcd, 0xef, 0xa7, 0xff, 0xff, 0x36, 0xf0, 0xff, 0xff, 0xff, 0xff,  // 0040
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xc0, 0xa8, 0x01, 0x0a,  // 0050
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xc0, 0xa8, 0x01, 0x14,  // 0060
    0x7c, 0xe0, 0xb0, 0x00, 0x00, 0x40, 0x00, 0x88, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 0070
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 0080
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 0090
    0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0xc3, 0xa4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 00a0
    0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 00b0
    0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x14, 0x55, 0x53, 0x45, 0x52, 0x00, 0x00, 0x00, 0x00,  // 00c0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 00d0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 00e0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 00f0
};
// clang-format on

// The byte at `offset` of the CM message, i.e. MAD byte 24 + offset (the
// tables of ib-cm.md §3 count from there).
uint8_t CmByte(const MadBytes& mad, size_t offset) {
  return mad[kMadHeaderSize + offset];
}

std::vector<uint8_t> CmBytes(const MadBytes& mad, size_t offset, size_t n) {
  return {mad.begin() + kMadHeaderSize + offset, mad.begin() + kMadHeaderSize + offset + n};
}

template <size_t N>
std::vector<uint8_t> Vec(const std::array<uint8_t, N>& a) {
  return {a.begin(), a.end()};
}

Mad Decoded(const MadBytes& bytes) {
  DecodeError error{};
  std::optional<Mad> mad = DecodeMad(bytes, &error);
  EXPECT_TRUE(mad.has_value()) << DecodeErrorName(error);
  return mad.value_or(Mad{});
}

// Encodes, checks that decoding gives back the same MAD and that its
// attribute id is `attr`; returns the bytes for position checks.
MadBytes EncodeAndRoundTrip(const Mad& mad, CmAttrId attr) {
  MadBytes bytes = Encode(mad);
  EXPECT_EQ(AttributeOf(mad.message), attr);
  EXPECT_EQ(bytes[16], uint16_t(attr) >> 8);
  EXPECT_EQ(bytes[17], uint16_t(attr) & 0xff);
  std::optional<Mad> back = DecodeMad(bytes);
  EXPECT_TRUE(back.has_value());
  if (back) {
    EXPECT_TRUE(*back == mad) << "decode(encode(m)) != m";
  }
  return bytes;
}

// ---- Bitfield masks: set one field to all ones (or true) in an otherwise
// zero message; exactly the bits of its mask in the §3 table must change.

using ByteDiff = std::vector<std::pair<size_t, uint8_t>>;  // (CM offset, changed bits)

ByteDiff DiffCm(const MadBytes& a, const MadBytes& b) {
  ByteDiff diff;
  for (size_t i = 0; i < kMadSize; ++i) {
    if (a[i] == b[i]) continue;
    EXPECT_GE(i, kMadHeaderSize) << "a message field changed MAD header byte " << i;
    diff.emplace_back(i - kMadHeaderSize, uint8_t(a[i] ^ b[i]));
  }
  return diff;
}

template <typename Msg>
struct BitCase {
  std::string field;
  std::function<void(Msg&)> set;
  ByteDiff want;
};

template <typename Msg>
void ExpectMasks(Msg zero, const std::vector<BitCase<Msg>>& cases) {
  const MadBytes base = Encode(Mad{.message = zero});
  for (const BitCase<Msg>& c : cases) {
    Msg changed = zero;
    c.set(changed);
    EXPECT_EQ(DiffCm(base, Encode(Mad{.message = changed})), c.want) << c.field;
  }
}

// ---------------------------------------------------------------- REQ (§9)

TEST(MadCodecWorkedExample, EncodesTheReqOfIbCmSection9ByteForByte) {
  const MadBytes bytes = Encode(samples::WorkedExampleReq());
  for (size_t i = 0; i < kMadSize; ++i) {
    EXPECT_EQ(bytes[i], kWorkedExampleReq[i]) << "MAD byte 0x" << std::hex << i;
  }
}

TEST(MadCodecWorkedExample, DecodesEveryFieldOfTheSection9Req) {
  DecodeError error{};
  std::optional<Mad> mad = DecodeMad(kWorkedExampleReq, &error);
  ASSERT_TRUE(mad.has_value()) << DecodeErrorName(error);
  EXPECT_EQ(mad->transaction_id, 0x12345678u);
  EXPECT_EQ(mad->attribute_modifier, 0u);
  EXPECT_EQ(AttributeOf(mad->message), CmAttrId::kReq);
  ASSERT_TRUE(std::holds_alternative<ReqMsg>(mad->message));
  const ReqMsg& req = std::get<ReqMsg>(mad->message);
  EXPECT_EQ(req.local_comm_id, 0x12345678u);
  EXPECT_EQ(req.vendor_id, 0u);
  EXPECT_EQ(req.service_id, 0x0000000001061D2Fu);
  EXPECT_EQ(PortSpaceOfServiceId(req.service_id), 0x0106);
  EXPECT_EQ(PortOfServiceId(req.service_id), 7471);
  EXPECT_EQ(req.local_ca_guid, 0x020000FFFE000001u);
  EXPECT_EQ(req.local_qkey, 0u);
  EXPECT_EQ(req.local_qpn, 0x11u);
  EXPECT_EQ(req.responder_resources, 1);
  EXPECT_EQ(req.local_eecn, 0u);
  EXPECT_EQ(req.initiator_depth, 1);
  EXPECT_EQ(req.remote_eecn, 0u);
  EXPECT_EQ(req.remote_cm_response_timeout, 20);
  EXPECT_EQ(req.transport, CmTransport::kRc);
  EXPECT_TRUE(req.flow_control);
  EXPECT_EQ(req.starting_psn, 0xABCDEFu);
  EXPECT_EQ(req.local_cm_response_timeout, 20);
  EXPECT_EQ(req.retry_count, 7);
  EXPECT_EQ(req.pkey, 0xFFFF);
  EXPECT_EQ(req.path_mtu, 3);
  EXPECT_FALSE(req.rdc_exists);
  EXPECT_EQ(req.rnr_retry_count, 6);
  EXPECT_EQ(req.max_cm_retries, 15);
  EXPECT_FALSE(req.srq);
  EXPECT_EQ(req.extended_transport, 0);
  EXPECT_EQ(req.primary_local_lid, 0xFFFF);
  EXPECT_EQ(req.primary_remote_lid, 0xFFFF);
  EXPECT_EQ(req.primary_local_gid, samples::Ipv4MappedGid(192, 168, 1, 10));
  EXPECT_EQ(req.primary_remote_gid, samples::Ipv4MappedGid(192, 168, 1, 20));
  EXPECT_EQ(req.primary_flow_label, 0x7CE0Bu);
  EXPECT_EQ(req.primary_packet_rate, 0);
  EXPECT_EQ(req.primary_traffic_class, 0);
  EXPECT_EQ(req.primary_hop_limit, 64);
  EXPECT_EQ(req.primary_sl, 0);
  EXPECT_FALSE(req.primary_subnet_local);
  EXPECT_EQ(req.primary_local_ack_timeout, 17);

  std::optional<CmaHeader> ip = DecodeCmaHeader(req.private_data);
  ASSERT_TRUE(ip.has_value());
  EXPECT_EQ(ip->ip_version, 4);
  EXPECT_EQ(ip->src_port, 0xC3A4);
  EXPECT_EQ(ip->src_ip, samples::CmaIpv4(192, 168, 1, 10));
  EXPECT_EQ(ip->dst_ip, samples::CmaIpv4(192, 168, 1, 20));
  EXPECT_EQ(std::string(req.private_data.begin() + kCmaHeaderSize,
                        req.private_data.begin() + kCmaHeaderSize + 4),
            "USER");
  for (size_t i = kCmaHeaderSize + 4; i < kReqPrivateDataSize; ++i) {
    EXPECT_EQ(req.private_data[i], 0) << i;
  }

  EXPECT_TRUE(*mad == samples::WorkedExampleReq());
}

TEST(MadCodecReq, DistinctiveValuesLandOnTheirBytes) {
  const ReqMsg req = samples::DistinctiveReq();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = req}, CmAttrId::kReq);
  EXPECT_EQ(CmBytes(b, 0, 4), (std::vector<uint8_t>{0x89, 0xAB, 0xCD, 0xEF}));
  EXPECT_EQ(CmByte(b, 4), 0);  // reserved
  EXPECT_EQ(CmBytes(b, 5, 3), (std::vector<uint8_t>{0x5A, 0x6B, 0x7C}));
  EXPECT_EQ(CmBytes(b, 8, 8), (std::vector<uint8_t>{0, 0, 0, 0, 0x01, 0x06, 0x01, 0x02}));
  EXPECT_EQ(CmBytes(b, 16, 8),
            (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}));
  EXPECT_EQ(CmBytes(b, 24, 4), (std::vector<uint8_t>{0, 0, 0, 0}));  // reserved
  EXPECT_EQ(CmBytes(b, 28, 4), (std::vector<uint8_t>{0x0B, 0xAD, 0xF0, 0x0D}));
  EXPECT_EQ(CmBytes(b, 32, 4), (std::vector<uint8_t>{0x65, 0x43, 0x21, 0x21}));  // QPN, RR
  EXPECT_EQ(CmBytes(b, 36, 4), (std::vector<uint8_t>{0x0A, 0x0B, 0x0C, 0x12}));  // EECN, ID
  EXPECT_EQ(CmBytes(b, 40, 3), (std::vector<uint8_t>{0x0D, 0x0E, 0x0F}));
  EXPECT_EQ(CmByte(b, 43), 0x9E);  // 10011 | XRC 11 | flow control 0
  EXPECT_EQ(CmBytes(b, 44, 3), (std::vector<uint8_t>{0x1F, 0xED, 0xCB}));
  EXPECT_EQ(CmByte(b, 47), 0x75);  // 01110 | retry 101
  EXPECT_EQ(CmBytes(b, 48, 2), (std::vector<uint8_t>{0x80, 0x01}));
  EXPECT_EQ(CmByte(b, 50), 0x5A);  // MTU 0101 | RDC 1 | RNR 010
  EXPECT_EQ(CmByte(b, 51), 0x99);  // max CM retries 1001 | SRQ 1 | ext 001
  EXPECT_EQ(CmBytes(b, 52, 4), (std::vector<uint8_t>{0x12, 0x34, 0x56, 0x78}));
  EXPECT_EQ(CmBytes(b, 56, 16), Vec(req.primary_local_gid));
  EXPECT_EQ(CmBytes(b, 72, 16), Vec(req.primary_remote_gid));
  // Flow label 0xABCDE in the top 20 bits of the word at 88, reserved 6 bits,
  // packet rate 0x2D in the low 6 bits of byte 91.
  EXPECT_EQ(CmBytes(b, 88, 4), (std::vector<uint8_t>{0xAB, 0xCD, 0xE0, 0x2D}));
  EXPECT_EQ(CmBytes(b, 92, 4), (std::vector<uint8_t>{0xB8, 0x7E, 0xA8, 0xC8}));  // SL|SubnetLocal
  EXPECT_EQ(CmBytes(b, 96, 44), std::vector<uint8_t>(44, 0));                    // alternate path
  EXPECT_EQ(CmBytes(b, 140, kReqPrivateDataSize), Vec(req.private_data));
}

TEST(MadCodecReq, EachBitfieldOccupiesItsMask) {
  ReqMsg zero;
  zero.pkey = 0;
  ExpectMasks<ReqMsg>(
      zero,
      {
          {"vendor_id",
           [](ReqMsg& m) { m.vendor_id = 0xFFFFFFFF; },
           {{5, 0xFF}, {6, 0xFF}, {7, 0xFF}}},
          {"local_qpn",
           [](ReqMsg& m) { m.local_qpn = 0xFFFFFFFF; },
           {{32, 0xFF}, {33, 0xFF}, {34, 0xFF}}},
          {"local_eecn",
           [](ReqMsg& m) { m.local_eecn = 0xFFFFFFFF; },
           {{36, 0xFF}, {37, 0xFF}, {38, 0xFF}}},
          {"remote_eecn",
           [](ReqMsg& m) { m.remote_eecn = 0xFFFFFFFF; },
           {{40, 0xFF}, {41, 0xFF}, {42, 0xFF}}},
          {"remote_cm_response_timeout",
           [](ReqMsg& m) { m.remote_cm_response_timeout = 0xFF; },
           {{43, 0xF8}}},
          {"transport", [](ReqMsg& m) { m.transport = CmTransport(0xFF); }, {{43, 0x06}}},
          {"flow_control", [](ReqMsg& m) { m.flow_control = true; }, {{43, 0x01}}},
          {"starting_psn",
           [](ReqMsg& m) { m.starting_psn = 0xFFFFFFFF; },
           {{44, 0xFF}, {45, 0xFF}, {46, 0xFF}}},
          {"local_cm_response_timeout",
           [](ReqMsg& m) { m.local_cm_response_timeout = 0xFF; },
           {{47, 0xF8}}},
          {"retry_count", [](ReqMsg& m) { m.retry_count = 0xFF; }, {{47, 0x07}}},
          {"pkey", [](ReqMsg& m) { m.pkey = 0xFFFF; }, {{48, 0xFF}, {49, 0xFF}}},
          {"path_mtu", [](ReqMsg& m) { m.path_mtu = 0xFF; }, {{50, 0xF0}}},
          {"rdc_exists", [](ReqMsg& m) { m.rdc_exists = true; }, {{50, 0x08}}},
          {"rnr_retry_count", [](ReqMsg& m) { m.rnr_retry_count = 0xFF; }, {{50, 0x07}}},
          {"max_cm_retries", [](ReqMsg& m) { m.max_cm_retries = 0xFF; }, {{51, 0xF0}}},
          {"srq", [](ReqMsg& m) { m.srq = true; }, {{51, 0x08}}},
          {"extended_transport", [](ReqMsg& m) { m.extended_transport = 0xFF; }, {{51, 0x07}}},
          {"primary_flow_label",
           [](ReqMsg& m) { m.primary_flow_label = 0xFFFFFFFF; },
           {{88, 0xFF}, {89, 0xFF}, {90, 0xF0}}},
          {"primary_packet_rate", [](ReqMsg& m) { m.primary_packet_rate = 0xFF; }, {{91, 0x3F}}},
          {"primary_sl", [](ReqMsg& m) { m.primary_sl = 0xFF; }, {{94, 0xF0}}},
          {"primary_subnet_local", [](ReqMsg& m) { m.primary_subnet_local = true; }, {{94, 0x08}}},
          {"primary_local_ack_timeout",
           [](ReqMsg& m) { m.primary_local_ack_timeout = 0xFF; },
           {{95, 0xF8}}},
      });
}

TEST(MadCodecReq, DecodeIgnoresReservedBitsAndTheAlternatePath) {
  MadBytes bytes = kWorkedExampleReq;
  bytes[kMadHeaderSize + 4] = 0xEE;    // reserved byte before the vendor ID
  bytes[kMadHeaderSize + 24] = 0xEE;   // reserved word before the Q_Key
  bytes[kMadHeaderSize + 90] |= 0x0F;  // reserved bits after the flow label
  bytes[kMadHeaderSize + 91] |= 0xC0;
  bytes[kMadHeaderSize + 95] |= 0x07;  // after the local ACK timeout
  bytes[kMadHeaderSize + 96] = 0x12;   // alternate local LID
  bytes[kMadHeaderSize + 139] = 0x04;  // SAP-supported bit
  EXPECT_TRUE(Decoded(bytes) == samples::WorkedExampleReq());
  // Re-encoding normalizes them back to zero.
  EXPECT_EQ(Encode(Decoded(bytes)), kWorkedExampleReq);
}

// ---------------------------------------------------------------- REP

TEST(MadCodecRep, DistinctiveValuesLandOnTheirBytes) {
  const RepMsg rep = samples::DistinctiveRep();
  const MadBytes b = EncodeAndRoundTrip(
      Mad{.transaction_id = 0x0102030405060708, .attribute_modifier = 0xA0B0C0D0, .message = rep},
      CmAttrId::kRep);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 8, b.begin() + 16),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));  // TID
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 20, b.begin() + 24),
            (std::vector<uint8_t>{0xA0, 0xB0, 0xC0, 0xD0}));  // attribute modifier (ECE)
  EXPECT_EQ(CmBytes(b, 0, 4), (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44}));
  EXPECT_EQ(CmBytes(b, 4, 4), (std::vector<uint8_t>{0x55, 0x66, 0x77, 0x88}));
  EXPECT_EQ(CmBytes(b, 8, 4), (std::vector<uint8_t>{0x99, 0xAA, 0xBB, 0xCC}));
  // QPN, vendor 23-16 | EECN, vendor 15-8 | PSN, vendor 7-0.
  EXPECT_EQ(CmBytes(b, 12, 4), (std::vector<uint8_t>{0x12, 0x34, 0x56, 0xA1}));
  EXPECT_EQ(CmBytes(b, 16, 4), (std::vector<uint8_t>{0x65, 0x43, 0x21, 0xB2}));
  EXPECT_EQ(CmBytes(b, 20, 4), (std::vector<uint8_t>{0xFE, 0xDC, 0xBA, 0xC3}));
  EXPECT_EQ(CmByte(b, 24), 0x5A);
  EXPECT_EQ(CmByte(b, 25), 0xA5);
  EXPECT_EQ(CmByte(b, 26), 0xAD);  // ACK delay 10101 | failover 10 | flow control 1
  EXPECT_EQ(CmByte(b, 27), 0xB0);  // RNR retry 101 | SRQ 1 | 0000
  EXPECT_EQ(CmBytes(b, 28, 8), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(CmBytes(b, 36, kRepPrivateDataSize), Vec(rep.private_data));
}

TEST(MadCodecRep, EachBitfieldOccupiesItsMask) {
  ExpectMasks<RepMsg>(
      RepMsg{},
      {
          {"local_qpn",
           [](RepMsg& m) { m.local_qpn = 0xFFFFFFFF; },
           {{12, 0xFF}, {13, 0xFF}, {14, 0xFF}}},
          {"vendor_id 23-16", [](RepMsg& m) { m.vendor_id = 0xFF0000; }, {{15, 0xFF}}},
          {"vendor_id 15-8", [](RepMsg& m) { m.vendor_id = 0x00FF00; }, {{19, 0xFF}}},
          {"vendor_id 7-0", [](RepMsg& m) { m.vendor_id = 0x0000FF; }, {{23, 0xFF}}},
          {"vendor_id 31-24", [](RepMsg& m) { m.vendor_id = 0xFF000000; }, {}},
          {"local_eecn",
           [](RepMsg& m) { m.local_eecn = 0xFFFFFFFF; },
           {{16, 0xFF}, {17, 0xFF}, {18, 0xFF}}},
          {"starting_psn",
           [](RepMsg& m) { m.starting_psn = 0xFFFFFFFF; },
           {{20, 0xFF}, {21, 0xFF}, {22, 0xFF}}},
          {"target_ack_delay", [](RepMsg& m) { m.target_ack_delay = 0xFF; }, {{26, 0xF8}}},
          {"failover_accepted", [](RepMsg& m) { m.failover_accepted = 0xFF; }, {{26, 0x06}}},
          {"flow_control", [](RepMsg& m) { m.flow_control = true; }, {{26, 0x01}}},
          {"rnr_retry_count", [](RepMsg& m) { m.rnr_retry_count = 0xFF; }, {{27, 0xE0}}},
          {"srq", [](RepMsg& m) { m.srq = true; }, {{27, 0x10}}},
      });
}

// ---------------------------------------------------------------- RTU, DREQ, DREP

TEST(MadCodecRtu, DistinctiveValuesLandOnTheirBytes) {
  const RtuMsg rtu = samples::DistinctiveRtu();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = rtu}, CmAttrId::kRtu);
  EXPECT_EQ(CmBytes(b, 0, 8),
            (std::vector<uint8_t>{0xC0, 0xDE, 0x00, 0x01, 0x00, 0x01, 0xC0, 0xDE}));
  EXPECT_EQ(CmBytes(b, 8, kRtuPrivateDataSize), Vec(rtu.private_data));
  EXPECT_EQ(b[kMadSize - 1], rtu.private_data.back());
}

TEST(MadCodecDreq, DistinctiveValuesLandOnTheirBytes) {
  const DreqMsg dreq = samples::DistinctiveDreq();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = dreq}, CmAttrId::kDreq);
  EXPECT_EQ(CmBytes(b, 0, 8),
            (std::vector<uint8_t>{0x76, 0x54, 0x32, 0x10, 0x01, 0x23, 0x45, 0x67}));
  EXPECT_EQ(CmBytes(b, 8, 4), (std::vector<uint8_t>{0xAB, 0xCD, 0xEF, 0x00}));  // QPN, reserved
  EXPECT_EQ(CmBytes(b, 12, kDreqPrivateDataSize), Vec(dreq.private_data));
}

TEST(MadCodecDreq, RemoteQpnIs24BitsAndLeavesByte11Alone) {
  ExpectMasks<DreqMsg>(DreqMsg{}, {{"remote_qpn",
                                    [](DreqMsg& m) { m.remote_qpn = 0xFFFFFFFF; },
                                    {{8, 0xFF}, {9, 0xFF}, {10, 0xFF}}}});
}

TEST(MadCodecDrep, DistinctiveValuesLandOnTheirBytes) {
  const DrepMsg drep = samples::DistinctiveDrep();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = drep}, CmAttrId::kDrep);
  EXPECT_EQ(CmBytes(b, 0, 8),
            (std::vector<uint8_t>{0x13, 0x57, 0x9B, 0xDF, 0x24, 0x68, 0xAC, 0xE0}));
  EXPECT_EQ(CmBytes(b, 8, kDrepPrivateDataSize), Vec(drep.private_data));
}

// ---------------------------------------------------------------- MRA, REJ

TEST(MadCodecMra, DistinctiveValuesLandOnTheirBytes) {
  const MraMsg mra = samples::DistinctiveMra();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = mra}, CmAttrId::kMra);
  EXPECT_EQ(CmBytes(b, 0, 8),
            (std::vector<uint8_t>{0xFA, 0xCE, 0x01, 0x23, 0x32, 0x10, 0xEC, 0xAF}));
  EXPECT_EQ(CmByte(b, 8), 0x80);  // message MRAed 10 (LAP) | reserved
  EXPECT_EQ(CmByte(b, 9), 0x98);  // service timeout 10011 | reserved
  EXPECT_EQ(CmBytes(b, 10, kMraPrivateDataSize), Vec(mra.private_data));
}

TEST(MadCodecMra, EachBitfieldOccupiesItsMask) {
  ExpectMasks<MraMsg>(
      MraMsg{},
      {
          {"message_mraed", [](MraMsg& m) { m.message_mraed = CmMessageKind(0xFF); }, {{8, 0xC0}}},
          {"service_timeout", [](MraMsg& m) { m.service_timeout = 0xFF; }, {{9, 0xF8}}},
      });
}

TEST(MadCodecRej, DistinctiveValuesLandOnTheirBytes) {
  const RejMsg rej = samples::DistinctiveRej();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = rej}, CmAttrId::kRej);
  EXPECT_EQ(CmBytes(b, 0, 8),
            (std::vector<uint8_t>{0x0A, 0x0B, 0x0C, 0x0D, 0x01, 0x02, 0x03, 0x04}));
  EXPECT_EQ(CmByte(b, 8), 0x40);  // message rejected 01 (REP) | reserved
  EXPECT_EQ(CmByte(b, 9), 0xAA);  // ARI length 1010101 | reserved
  EXPECT_EQ(CmBytes(b, 10, 2), (std::vector<uint8_t>{0x01, 0x1C}));
  EXPECT_EQ(CmBytes(b, 12, kRejAriSize), Vec(rej.ari));
  EXPECT_EQ(CmBytes(b, 84, kRejPrivateDataSize), Vec(rej.private_data));
}

TEST(MadCodecRej, EachBitfieldOccupiesItsMask) {
  ExpectMasks<RejMsg>(
      RejMsg{}, {
                    {"message_rejected",
                     [](RejMsg& m) { m.message_rejected = CmMessageKind(0xFF); },
                     {{8, 0xC0}}},
                    {"ari_length", [](RejMsg& m) { m.ari_length = 0xFF; }, {{9, 0xFE}}},
                    {"reason", [](RejMsg& m) { m.reason = 0xFFFF; }, {{10, 0xFF}, {11, 0xFF}}},
                });
}

TEST(MadCodecRej, TimeoutWithCaGuidAsAri) {
  // Linux rejects with reason 4 (timeout) and its CA GUID in the ARI when an
  // id in REQ_SENT is destroyed (ib-cm.md §6.3): a plausible real REJ.
  RejMsg rej{.local_comm_id = 0x12345678, .remote_comm_id = 0, .reason = 4};
  rej.ari_length = 8;
  const std::array<uint8_t, 8> guid{0x02, 0, 0, 0xFF, 0xFE, 0, 0, 0x01};
  std::copy(guid.begin(), guid.end(), rej.ari.begin());
  const MadBytes b = EncodeAndRoundTrip(Mad{.transaction_id = 7, .message = rej}, CmAttrId::kRej);
  EXPECT_EQ(CmByte(b, 8), 0x00);
  EXPECT_EQ(CmByte(b, 9), 0x10);
  EXPECT_EQ(CmBytes(b, 10, 2), (std::vector<uint8_t>{0x00, 0x04}));
  EXPECT_EQ(CmBytes(b, 12, 8), Vec(guid));
}

// ---------------------------------------------------------------- SIDR

TEST(MadCodecSidrReq, DistinctiveValuesLandOnTheirBytes) {
  const SidrReqMsg req = samples::DistinctiveSidrReq();
  const MadBytes b = EncodeAndRoundTrip(Mad{.message = req}, CmAttrId::kSidrReq);
  EXPECT_EQ(CmBytes(b, 0, 4), (std::vector<uint8_t>{0xDE, 0xAD, 0xBE, 0xEF}));
  EXPECT_EQ(CmBytes(b, 4, 4), (std::vector<uint8_t>{0x7F, 0xFE, 0x00, 0x00}));  // P_Key, reserved
  EXPECT_EQ(CmBytes(b, 8, 8), (std::vector<uint8_t>{0, 0, 0, 0, 0x01, 0x11, 0x12, 0x34}));
  EXPECT_EQ(CmBytes(b, 16, kSidrReqPrivateDataSize), Vec(req.private_data));
}

TEST(MadCodecSidrRep, DistinctiveValuesLandOnTheirBytes) {
  const SidrRepMsg rep = samples::DistinctiveSidrRep();
  const MadBytes b =
      EncodeAndRoundTrip(Mad{.attribute_modifier = 5, .message = rep}, CmAttrId::kSidrRep);
  EXPECT_EQ(CmBytes(b, 0, 4), (std::vector<uint8_t>{0xFE, 0xED, 0xFA, 0xCE}));
  EXPECT_EQ(CmByte(b, 4), 2);     // status
  EXPECT_EQ(CmByte(b, 5), 0x48);  // additional information length
  // Vendor ID 0xBEEF: bits 15-8 zero-extended in the 16-bit field at 6, bits
  // 7-0 after the QPN.
  EXPECT_EQ(CmBytes(b, 6, 6), (std::vector<uint8_t>{0x00, 0xBE, 0x89, 0xAB, 0xCD, 0xEF}));
  EXPECT_EQ(CmBytes(b, 12, 8), (std::vector<uint8_t>{0, 0, 0, 0, 0x01, 0x11, 0x56, 0x78}));
  EXPECT_EQ(CmBytes(b, 20, 4), (std::vector<uint8_t>{0x01, 0x23, 0x45, 0x67}));
  EXPECT_EQ(CmBytes(b, 24, kSidrRepInfoSize), Vec(rep.info));
  EXPECT_EQ(CmBytes(b, 96, kSidrRepPrivateDataSize), Vec(rep.private_data));
}

TEST(MadCodecSidrRep, VendorIdAndQpnOccupyTheirBytes) {
  ExpectMasks<SidrRepMsg>(
      SidrRepMsg{},
      {
          {"vendor_id 15-8", [](SidrRepMsg& m) { m.vendor_id = 0xFF00; }, {{7, 0xFF}}},
          {"vendor_id 7-0", [](SidrRepMsg& m) { m.vendor_id = 0x00FF; }, {{11, 0xFF}}},
          {"vendor_id 31-16", [](SidrRepMsg& m) { m.vendor_id = 0xFFFF0000; }, {}},
          {"qpn", [](SidrRepMsg& m) { m.qpn = 0xFFFFFFFF; }, {{8, 0xFF}, {9, 0xFF}, {10, 0xFF}}},
      });
}

// ---------------------------------------------------------------- MAD header

TEST(MadCodecHeader, EveryMessageGetsTheCmSendHeader) {
  for (const Mad& mad : samples::OneOfEach()) {
    const MadBytes b = Encode(mad);
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 8),
              (std::vector<uint8_t>{0x01, 0x07, 0x02, 0x03, 0, 0, 0, 0}));
    EXPECT_EQ(b[18], 0);  // reserved
    EXPECT_EQ(b[19], 0);
    uint64_t tid = 0;
    for (size_t i = 8; i < 16; ++i) tid = (tid << 8) | b[i];
    EXPECT_EQ(tid, mad.transaction_id);
    EXPECT_EQ(uint32_t(b[20]) << 24 | uint32_t(b[21]) << 16 | uint32_t(b[22]) << 8 | b[23],
              mad.attribute_modifier);
    EXPECT_TRUE(Decoded(b) == mad);
  }
}

TEST(MadCodecHeader, AttributeIdsAreThoseOfSection2) {
  const std::array<CmAttrId, 9> want = {CmAttrId::kReq,  CmAttrId::kRep,     CmAttrId::kRtu,
                                        CmAttrId::kRej,  CmAttrId::kMra,     CmAttrId::kDreq,
                                        CmAttrId::kDrep, CmAttrId::kSidrReq, CmAttrId::kSidrRep};
  const std::array<uint16_t, 9> wire = {0x10, 0x13, 0x14, 0x12, 0x11, 0x15, 0x16, 0x17, 0x18};
  const std::array<Mad, 9> mads = samples::OneOfEach();
  for (size_t i = 0; i < mads.size(); ++i) {
    EXPECT_EQ(AttributeOf(mads[i].message), want[i]);
    const MadBytes b = Encode(mads[i]);
    EXPECT_EQ(uint16_t(b[16] << 8 | b[17]), wire[i]);
  }
}

TEST(MadCodecHeader, EncodeClearsWhateverTheBufferHeld) {
  MadBytes bytes;
  bytes.fill(0xA5);
  EncodeMad(samples::WorkedExampleReq(), bytes);
  EXPECT_EQ(bytes, kWorkedExampleReq);
}

// ---------------------------------------------------------------- DecodeError

std::optional<DecodeError> ErrorOf(std::span<const uint8_t> bytes) {
  DecodeError error{};
  if (DecodeMad(bytes, &error)) return std::nullopt;
  return error;
}

MadBytes WithByte(size_t index, uint8_t value) {
  MadBytes bytes = kWorkedExampleReq;
  bytes[index] = value;
  return bytes;
}

TEST(MadCodecDecodeError, WrongSize) {
  std::vector<uint8_t> bytes(kWorkedExampleReq.begin(), kWorkedExampleReq.end());
  EXPECT_EQ(ErrorOf(std::span<const uint8_t>()), DecodeError::kWrongSize);
  EXPECT_EQ(ErrorOf(std::span(bytes).first(kMadSize - 1)), DecodeError::kWrongSize);
  EXPECT_EQ(ErrorOf(std::span(bytes).first(kMadHeaderSize)), DecodeError::kWrongSize);
  bytes.push_back(0);
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kWrongSize);
  bytes.resize(512);
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kWrongSize);
  bytes.resize(kMadSize);
  EXPECT_EQ(ErrorOf(bytes), std::nullopt);
}

TEST(MadCodecDecodeError, BadBaseVersion) {
  EXPECT_EQ(ErrorOf(WithByte(0, 0)), DecodeError::kBadBaseVersion);
  EXPECT_EQ(ErrorOf(WithByte(0, 2)), DecodeError::kBadBaseVersion);
  EXPECT_EQ(ErrorOf(WithByte(0, 0x81)), DecodeError::kBadBaseVersion);
}

TEST(MadCodecDecodeError, NotCmClass) {
  EXPECT_EQ(ErrorOf(WithByte(1, 0x01)), DecodeError::kNotCmClass);  // subnet management
  EXPECT_EQ(ErrorOf(WithByte(1, 0x03)), DecodeError::kNotCmClass);  // subnet administration
  EXPECT_EQ(ErrorOf(WithByte(1, 0x87)), DecodeError::kNotCmClass);
}

TEST(MadCodecDecodeError, BadClassVersion) {
  EXPECT_EQ(ErrorOf(WithByte(2, 1)), DecodeError::kBadClassVersion);
  EXPECT_EQ(ErrorOf(WithByte(2, 3)), DecodeError::kBadClassVersion);
}

TEST(MadCodecDecodeError, BadMethod) {
  EXPECT_EQ(ErrorOf(WithByte(3, 0x01)), DecodeError::kBadMethod);  // Get
  EXPECT_EQ(ErrorOf(WithByte(3, 0x02)), DecodeError::kBadMethod);  // Set
  EXPECT_EQ(ErrorOf(WithByte(3, 0x83)), DecodeError::kBadMethod);  // Send with the R bit
  EXPECT_EQ(ErrorOf(WithByte(3, 0x81)), DecodeError::kBadMethod);  // GetResp
}

TEST(MadCodecDecodeError, UnknownAttribute) {
  for (uint16_t attr : {0x0000, 0x0001 /* ClassPortInfo */, 0x000F, 0x0019 /* LAP */,
                        0x001A /* APR */, 0x1010, 0xFF10, 0xFFFF}) {
    MadBytes bytes = kWorkedExampleReq;
    bytes[16] = uint8_t(attr >> 8);
    bytes[17] = uint8_t(attr);
    EXPECT_EQ(ErrorOf(bytes), DecodeError::kUnknownAttribute) << std::hex << attr;
  }
  for (uint16_t attr = 0x10; attr <= 0x18; ++attr) {
    MadBytes bytes = kWorkedExampleReq;
    bytes[17] = uint8_t(attr);
    EXPECT_EQ(ErrorOf(bytes), std::nullopt) << std::hex << attr;
  }
}

TEST(MadCodecDecodeError, TheFirstWrongHeaderByteNamesTheError) {
  MadBytes bytes = kWorkedExampleReq;
  bytes[17] = 0x19;
  bytes[3] = 0x83;
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kBadMethod);
  bytes[2] = 1;
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kBadClassVersion);
  bytes[1] = 4;
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kNotCmClass);
  bytes[0] = 2;
  EXPECT_EQ(ErrorOf(bytes), DecodeError::kBadBaseVersion);
}

TEST(MadCodecDecodeError, NullErrorPointerIsAllowed) {
  EXPECT_FALSE(DecodeMad(WithByte(0, 9)).has_value());
  EXPECT_FALSE(DecodeMad(WithByte(0, 9), nullptr).has_value());
}

TEST(MadCodecDecodeError, StatusAndClassSpecificAreNotChecked) {
  // The CM ignores them (ib-cm.md §2 only says the CM sends 0).
  MadBytes bytes = kWorkedExampleReq;
  bytes[4] = 0x12;
  bytes[7] = 0x34;
  EXPECT_EQ(ErrorOf(bytes), std::nullopt);
}

TEST(MadCodecDecodeError, EveryErrorHasItsOwnName) {
  const std::array<DecodeError, 6> all = {DecodeError::kWrongSize,  DecodeError::kBadBaseVersion,
                                          DecodeError::kNotCmClass, DecodeError::kBadClassVersion,
                                          DecodeError::kBadMethod,  DecodeError::kUnknownAttribute};
  std::vector<std::string> names;
  for (DecodeError e : all) {
    ASSERT_NE(DecodeErrorName(e), nullptr);
    names.emplace_back(DecodeErrorName(e));
    EXPECT_FALSE(names.back().empty());
  }
  std::sort(names.begin(), names.end());
  EXPECT_TRUE(std::adjacent_find(names.begin(), names.end()) == names.end());
  EXPECT_STREQ(DecodeErrorName(DecodeError::kWrongSize), "wrong_size");
  EXPECT_STREQ(DecodeErrorName(DecodeError(99)), "unknown_error");
}

}  // namespace
}  // namespace softrdma::cm
