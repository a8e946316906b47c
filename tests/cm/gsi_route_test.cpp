// How a CM MAD that came to QP1 finds its process (util/gsi_route.h): every
// message the CM sends, encoded by the CM's own codec, names the socket of
// the process it is for; anything else is refused with its reason. Also the
// forwarder's envelope and the names of peers behind QP1 (cm/remote_peer.h).
#include "util/gsi_route.h"

#include <cerrno>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "cm/mad_codec.h"
#include "cm/remote_peer.h"
#include "cm_mad_samples.h"

namespace softrdma::cm {
namespace {

using samples::Encode;

constexpr uint16_t kTcpPs = 0x0106;  // RDMA_PS_TCP
constexpr uint16_t kUdpPs = 0x0111;  // RDMA_PS_UDP
constexpr uint32_t kOwnersCommId = MakeCommId(0x4321, 0x0007);

std::string Route(const Mad& mad) {
  std::string name;
  Status status = CmSocketForMad(Encode(mad), &name);
  EXPECT_TRUE(status.ok()) << status.message();
  return name;
}

TEST(GsiRoute, CommIdCarriesTheConnectionSocketNumber) {
  EXPECT_EQ(kOwnersCommId, 0x43210007u);
  EXPECT_EQ(CommIdSocketNumber(kOwnersCommId), 0x4321);
  EXPECT_EQ(CommIdSocketNumber(MakeCommId(0xffff, 0xffff)), 0xffff);
}

TEST(GsiRoute, RequestsGoToTheListenersPort) {
  ReqMsg req;
  req.local_comm_id = 0x11112222;  // the sender's: says nothing about the receiver
  req.service_id = ServiceIdOf(kTcpPs, 7471);
  EXPECT_EQ(Route(Mad{1, 0, req}), CmSocketName(kTcpPs, 7471));

  SidrReqMsg sidr;
  sidr.request_id = 0x11112222;
  sidr.service_id = ServiceIdOf(kUdpPs, 18515);
  EXPECT_EQ(Route(Mad{2, 0, sidr}), CmSocketName(kUdpPs, 18515));
}

TEST(GsiRoute, EveryOtherMessageGoesToTheOwnerOfTheReceiversCommId) {
  const std::string owner = CmSocketName(kCmProcessPortSpace, 0x4321);
  RepMsg rep;
  rep.local_comm_id = 0x99998888;
  rep.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{3, 0, rep}), owner);
  RtuMsg rtu;
  rtu.local_comm_id = 0x99998888;
  rtu.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{4, 0, rtu}), owner);
  RejMsg rej;
  rej.local_comm_id = 0;  // a REJ of a REQ nobody accepted has none of its own
  rej.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{5, 0, rej}), owner);
  MraMsg mra;
  mra.local_comm_id = 0x99998888;
  mra.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{6, 0, mra}), owner);
  DreqMsg dreq;
  dreq.local_comm_id = 0x99998888;
  dreq.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{7, 0, dreq}), owner);
  DrepMsg drep;
  drep.local_comm_id = 0x99998888;
  drep.remote_comm_id = kOwnersCommId;
  EXPECT_EQ(Route(Mad{8, 0, drep}), owner);
  SidrRepMsg sidr_rep;
  sidr_rep.request_id = kOwnersCommId;
  sidr_rep.service_id = ServiceIdOf(kUdpPs, 18515);
  EXPECT_EQ(Route(Mad{9, 0, sidr_rep}), owner);
}

TEST(GsiRoute, RefusesWhatIsNotARoutableCmMad) {
  RtuMsg rtu;
  rtu.remote_comm_id = kOwnersCommId;
  std::array<uint8_t, kMadSize> mad = Encode(Mad{1, 0, rtu});
  std::string name;

  EXPECT_EQ(CmSocketForMad(std::span<const uint8_t>(mad).first(255), &name).code(), EBADMSG);
  auto other_class = mad;
  other_class[1] = 0x03;  // SubnAdm
  EXPECT_EQ(CmSocketForMad(other_class, &name).code(), EBADMSG);
  auto other_version = mad;
  other_version[0] = 2;
  EXPECT_EQ(CmSocketForMad(other_version, &name).code(), EBADMSG);
  auto lap = mad;
  lap[16] = 0x00;
  lap[17] = 0x19;  // LAP: the CM does not do path migration
  EXPECT_EQ(CmSocketForMad(lap, &name).code(), EPROTONOSUPPORT);
  auto class_port_info = mad;
  class_port_info[17] = 0x01;
  EXPECT_EQ(CmSocketForMad(class_port_info, &name).code(), EPROTONOSUPPORT);
  rtu.remote_comm_id = 0;
  EXPECT_EQ(CmSocketForMad(Encode(Mad{1, 0, rtu}), &name).code(), EINVAL);
  SidrRepMsg sidr_rep;  // request id 0
  EXPECT_EQ(CmSocketForMad(Encode(Mad{1, 0, sidr_rep}), &name).code(), EINVAL);
}

TEST(GsiRoute, NoListenerAnswersAreWhatACmWithoutAListenerSends) {
  ReqMsg req;
  req.local_comm_id = 0x0abc0001;
  req.service_id = ServiceIdOf(kTcpPs, 7471);
  std::array<uint8_t, kMadSize> answer{};
  ASSERT_TRUE(NoListenerAnswer(Encode(Mad{0x1122334455667788, 0, req}), answer));
  DecodeError error;
  std::optional<Mad> mad = DecodeMad(answer, &error);
  ASSERT_TRUE(mad) << DecodeErrorName(error);
  EXPECT_EQ(mad->transaction_id, 0x1122334455667788u);
  const auto* rej = std::get_if<RejMsg>(&mad->message);
  ASSERT_NE(rej, nullptr);
  EXPECT_EQ(rej->local_comm_id, 0u);
  EXPECT_EQ(rej->remote_comm_id, 0x0abc0001u);
  EXPECT_EQ(rej->message_rejected, CmMessageKind::kReq);
  EXPECT_EQ(rej->reason, 8);  // invalid service ID
  std::string name;
  ASSERT_TRUE(CmSocketForMad(answer, &name).ok());  // and it routes back to the requester
  EXPECT_EQ(name, CmSocketName(kCmProcessPortSpace, 0x0abc));

  SidrReqMsg sidr;
  sidr.request_id = 0x0abc0002;
  sidr.service_id = ServiceIdOf(kUdpPs, 18515);
  ASSERT_TRUE(NoListenerAnswer(Encode(Mad{7, 0, sidr}), answer));
  mad = DecodeMad(answer, &error);
  ASSERT_TRUE(mad) << DecodeErrorName(error);
  const auto* rep = std::get_if<SidrRepMsg>(&mad->message);
  ASSERT_NE(rep, nullptr);
  EXPECT_EQ(mad->transaction_id, 7u);
  EXPECT_EQ(rep->request_id, 0x0abc0002u);
  EXPECT_EQ(rep->status, 1);  // service ID not supported
  EXPECT_EQ(rep->service_id, sidr.service_id);

  RepMsg other;  // nothing to answer
  other.remote_comm_id = kOwnersCommId;
  EXPECT_FALSE(NoListenerAnswer(Encode(Mad{1, 0, other}), answer));
  auto not_cm = Encode(Mad{1, 0, req});
  not_cm[1] = 0x03;
  EXPECT_FALSE(NoListenerAnswer(not_cm, answer));
}

TEST(GsiRoute, EnvelopeRoundTripAndRefusals) {
  ReqMsg req;
  req.service_id = ServiceIdOf(kTcpPs, 1);
  std::array<uint8_t, kMadSize> mad = Encode(Mad{0x1234, 0, req});
  GsiEnvelope in;
  in.remote_gid = samples::Ipv4MappedGid(192, 0, 2, 2);
  in.local_gid = samples::Ipv4MappedGid(192, 0, 2, 1);
  in.remote_qpn = 0xabcdef;
  in.pkey = 0x7fff;
  std::array<uint8_t, kGsiEnvelopeSize> bytes{};
  EncodeGsiEnvelope(in, mad, bytes);

  GsiEnvelope out;
  std::span<const uint8_t> inner;
  ASSERT_TRUE(DecodeGsiEnvelope(bytes, &out, &inner));
  EXPECT_EQ(out.remote_gid, in.remote_gid);
  EXPECT_EQ(out.local_gid, in.local_gid);
  EXPECT_EQ(out.remote_qpn, in.remote_qpn);
  EXPECT_EQ(out.pkey, in.pkey);
  ASSERT_EQ(inner.size(), kMadSize);
  EXPECT_TRUE(std::equal(inner.begin(), inner.end(), mad.begin()));

  EXPECT_FALSE(DecodeGsiEnvelope(mad, &out, &inner));  // a bare MAD (this host's CM)
  EXPECT_FALSE(
      DecodeGsiEnvelope(std::span<const uint8_t>(bytes).first(kGsiEnvelopeSize - 1), &out, &inner));
  auto bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_FALSE(DecodeGsiEnvelope(bad_magic, &out, &inner));
}

TEST(RemotePeer, NameRoundTripsAndIsNeverASocketName) {
  Gid local = samples::Ipv4MappedGid(192, 0, 2, 1);
  Gid remote{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd};
  std::string name = RemotePeerName(local, remote);
  EXPECT_EQ(name, "roce:00000000000000000000ffffc0000201:fd00000000000000000000000000abcd");
  EXPECT_TRUE(IsRemotePeerName(name));
  EXPECT_FALSE(IsRemotePeerName(CmSocketName(kTcpPs, 7471)));
  Gid l{};
  Gid r{};
  ASSERT_TRUE(ParseRemotePeerName(name, &l, &r));
  EXPECT_EQ(l, local);
  EXPECT_EQ(r, remote);
  EXPECT_FALSE(ParseRemotePeerName(name.substr(0, name.size() - 1), &l, &r));
  EXPECT_FALSE(
      ParseRemotePeerName("roce:" + std::string(32, 'g') + ":" + std::string(32, '0'), &l, &r));
  EXPECT_FALSE(ParseRemotePeerName(CmSocketName(kTcpPs, 7471), &l, &r));
}

}  // namespace
}  // namespace softrdma::cm
