// CM messages with known contents, shared by the MAD codec tests and the fuzz
// target's seed-corpus generator (tests/fuzz/make_corpus.cpp).
//
// The "distinctive" messages give every field a value that differs from its
// neighbours and from zero, with asymmetric bit patterns, so that a field
// written at the wrong offset, shifted, or swapped with another shows up in the
// byte checks.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "cm/mad_codec.h"

namespace softrdma::cm::samples {

inline std::array<uint8_t, kMadSize> Encode(const Mad& mad) {
  std::array<uint8_t, kMadSize> out{};
  EncodeMad(mad, out);
  return out;
}

// N bytes seed, seed + 13, seed + 26, ... (mod 256): recognisable, and no
// two arrays with different seeds line up.
template <size_t N>
std::array<uint8_t, N> Pattern(uint8_t seed) {
  std::array<uint8_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = uint8_t(seed + 13 * i);
  return out;
}

inline Gid Ipv4MappedGid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

// An IPv4 address as CmaHeader holds it: bytes 12-15, the rest zero.
inline std::array<uint8_t, 16> CmaIpv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d};
}

// The REQ of ib-cm.md §9: 192.168.1.10 (QPN 0x11, rdma_cm port 0xC3A4)
// connects to 192.168.1.20 port 7471 with RDMA_PS_TCP.
inline Mad WorkedExampleReq() {
  ReqMsg req;
  req.local_comm_id = 0x12345678;
  req.vendor_id = 0;
  req.service_id = ServiceIdOf(0x0106, 7471);
  req.local_ca_guid = 0x020000FFFE000001;
  req.local_qkey = 0;
  req.local_qpn = 0x11;
  req.responder_resources = 1;
  req.local_eecn = 0;
  req.initiator_depth = 1;
  req.remote_eecn = 0;
  req.remote_cm_response_timeout = 20;
  req.transport = CmTransport::kRc;
  req.flow_control = true;
  req.starting_psn = 0xABCDEF;
  req.local_cm_response_timeout = 20;
  req.retry_count = 7;
  req.pkey = 0xFFFF;
  req.path_mtu = 3;
  req.rdc_exists = false;
  req.rnr_retry_count = 6;
  req.max_cm_retries = 15;
  req.srq = false;
  req.extended_transport = 0;
  req.primary_local_lid = 0xFFFF;
  req.primary_remote_lid = 0xFFFF;
  req.primary_local_gid = Ipv4MappedGid(192, 168, 1, 10);
  req.primary_remote_gid = Ipv4MappedGid(192, 168, 1, 20);
  req.primary_flow_label = (0xC3A4 * 31 + 7471) & 0xFFFFF;
  req.primary_packet_rate = 0;
  req.primary_traffic_class = 0;
  req.primary_hop_limit = 64;
  req.primary_sl = 0;
  req.primary_subnet_local = false;
  req.primary_local_ack_timeout = 17;
  CmaHeader ip{.ip_version = 4,
               .src_port = 0xC3A4,
               .src_ip = CmaIpv4(192, 168, 1, 10),
               .dst_ip = CmaIpv4(192, 168, 1, 20)};
  EncodeCmaHeader(ip, std::span<uint8_t, kCmaHeaderSize>(req.private_data.data(), kCmaHeaderSize));
  constexpr std::string_view kUser = "USER";
  for (size_t i = 0; i < kUser.size(); ++i) req.private_data[kCmaHeaderSize + i] = kUser[i];
  return Mad{.transaction_id = 0x12345678, .attribute_modifier = 0, .message = req};
}

// A REQ unlike any rdma_cm would send (XRC, SRQ, RDC, ECE vendor ID, ...),
// to exercise the fields the worked example leaves at zero.
inline ReqMsg DistinctiveReq() {
  ReqMsg req;
  req.local_comm_id = 0x89ABCDEF;
  req.vendor_id = 0x5A6B7C;
  req.service_id = 0x0000000001060102;
  req.local_ca_guid = 0x1122334455667788;
  req.local_qkey = 0x0BADF00D;
  req.local_qpn = 0x654321;
  req.responder_resources = 0x21;
  req.local_eecn = 0x0A0B0C;
  req.initiator_depth = 0x12;
  req.remote_eecn = 0x0D0E0F;
  req.remote_cm_response_timeout = 0x13;  // 10011
  req.transport = CmTransport::kXrc;
  req.flow_control = false;
  req.starting_psn = 0x1FEDCB;
  req.local_cm_response_timeout = 0x0E;  // 01110
  req.retry_count = 5;
  req.pkey = 0x8001;
  req.path_mtu = 5;
  req.rdc_exists = true;
  req.rnr_retry_count = 2;
  req.max_cm_retries = 9;
  req.srq = true;
  req.extended_transport = 1;
  req.primary_local_lid = 0x1234;
  req.primary_remote_lid = 0x5678;
  req.primary_local_gid = Pattern<16>(0xF0);
  req.primary_remote_gid = Pattern<16>(0x0F);
  req.primary_flow_label = 0xABCDE;
  req.primary_packet_rate = 0x2D;
  req.primary_traffic_class = 0xB8;
  req.primary_hop_limit = 0x7E;
  req.primary_sl = 0xA;
  req.primary_subnet_local = true;
  req.primary_local_ack_timeout = 0x19;
  req.private_data = Pattern<kReqPrivateDataSize>(0x31);
  return req;
}

inline RepMsg DistinctiveRep() {
  RepMsg rep;
  rep.local_comm_id = 0x11223344;
  rep.remote_comm_id = 0x55667788;
  rep.local_qkey = 0x99AABBCC;
  rep.local_qpn = 0x123456;
  rep.vendor_id = 0xA1B2C3;
  rep.local_eecn = 0x654321;
  rep.starting_psn = 0xFEDCBA;
  rep.responder_resources = 0x5A;
  rep.initiator_depth = 0xA5;
  rep.target_ack_delay = 0x15;  // 10101
  rep.failover_accepted = 2;
  rep.flow_control = true;
  rep.rnr_retry_count = 5;
  rep.srq = true;
  rep.local_ca_guid = 0x0102030405060708;
  rep.private_data = Pattern<kRepPrivateDataSize>(0x42);
  return rep;
}

inline RtuMsg DistinctiveRtu() {
  return RtuMsg{.local_comm_id = 0xC0DE0001,
                .remote_comm_id = 0x0001C0DE,
                .private_data = Pattern<kRtuPrivateDataSize>(0x53)};
}

inline RejMsg DistinctiveRej() {
  return RejMsg{.local_comm_id = 0x0A0B0C0D,
                .remote_comm_id = 0x01020304,
                .message_rejected = CmMessageKind::kRep,
                .ari_length = 0x55,  // 1010101
                .reason = 0x011C,
                .ari = Pattern<kRejAriSize>(0x64),
                .private_data = Pattern<kRejPrivateDataSize>(0x75)};
}

inline MraMsg DistinctiveMra() {
  return MraMsg{.local_comm_id = 0xFACE0123,
                .remote_comm_id = 0x3210ECAF,
                .message_mraed = CmMessageKind::kOther,
                .service_timeout = 0x13,  // 10011
                .private_data = Pattern<kMraPrivateDataSize>(0x86)};
}

inline DreqMsg DistinctiveDreq() {
  return DreqMsg{.local_comm_id = 0x76543210,
                 .remote_comm_id = 0x01234567,
                 .remote_qpn = 0xABCDEF,
                 .private_data = Pattern<kDreqPrivateDataSize>(0x97)};
}

inline DrepMsg DistinctiveDrep() {
  return DrepMsg{.local_comm_id = 0x13579BDF,
                 .remote_comm_id = 0x2468ACE0,
                 .private_data = Pattern<kDrepPrivateDataSize>(0xA8)};
}

inline SidrReqMsg DistinctiveSidrReq() {
  return SidrReqMsg{.request_id = 0xDEADBEEF,
                    .pkey = 0x7FFE,
                    .service_id = ServiceIdOf(0x0111, 0x1234),
                    .private_data = Pattern<kSidrReqPrivateDataSize>(0xB9)};
}

inline SidrRepMsg DistinctiveSidrRep() {
  return SidrRepMsg{.request_id = 0xFEEDFACE,
                    .status = 2,
                    .info_length = 0x48,
                    .vendor_id = 0xBEEF,
                    .qpn = 0x89ABCD,
                    .service_id = 0x0000000001115678,
                    .qkey = 0x01234567,
                    .info = Pattern<kSidrRepInfoSize>(0xCA),
                    .private_data = Pattern<kSidrRepPrivateDataSize>(0xDB)};
}

// One MAD of each message type (the worked-example REQ first); TIDs and
// attribute modifiers differ so they too are checked.
inline std::array<Mad, 9> OneOfEach() {
  return {WorkedExampleReq(),
          Mad{0x0102030405060708, 0x00000001, DistinctiveRep()},
          Mad{0x1112131415161718, 0, DistinctiveRtu()},
          Mad{0x2122232425262728, 0, DistinctiveRej()},
          Mad{0x3132333435363738, 0, DistinctiveMra()},
          Mad{0x4142434445464748, 0, DistinctiveDreq()},
          Mad{0x5152535455565758, 0, DistinctiveDrep()},
          Mad{0x6162636465666768, 0, DistinctiveSidrReq()},
          Mad{0x7172737475767778, 0x80000002, DistinctiveSidrRep()}};
}

}  // namespace softrdma::cm::samples
