// The GSI forwarder (host/gsi_forwarder.h): a datagram to QP1 from another
// host reaches, inside an envelope with the packet's addresses, the abstract
// socket of the process it is for; anything else is dropped and counted.
#include "host/gsi_forwarder.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "util/gsi_route.h"

namespace softrdma {
namespace {

using Gid = std::array<uint8_t, 16>;

// A CM MAD typed by hand (ib-cm.md §2-§3): base version 1, class CM, class
// version 2, method Send, attribute `attr`; `id_at` holds `id` (4 bytes) or,
// for a REQ, the service id at MAD byte 32.
std::array<uint8_t, 256> Mad(uint16_t attr) {
  std::array<uint8_t, 256> mad{};
  mad[0] = 1;
  mad[1] = 0x07;
  mad[2] = 2;
  mad[3] = 0x03;
  mad[16] = uint8_t(attr >> 8);
  mad[17] = uint8_t(attr);
  return mad;
}
void Put(std::array<uint8_t, 256>* mad, size_t offset, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) (*mad)[offset + width - 1 - i] = uint8_t(value >> (8 * i));
}

// A bound abstract socket with a CM name, as the CM's.
class CmSocket {
 public:
  explicit CmSocket(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr),
                  socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0;
  }
  ~CmSocket() { close(fd_); }
  bool bound() const { return bound_; }
  ssize_t Read(uint8_t* buf, size_t len) { return recv(fd_, buf, len, MSG_DONTWAIT); }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

// A port number no other test process is likely to hold.
uint16_t TestPort(int salt) {
  return uint16_t(20000 + (getpid() * 7 + salt) % 20000);
}

// The socket names depend on SOFTRDMA_NAMESPACE, read once per process:
// set it as the other tests of this binary do, before the first name.
class GsiForwarder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("SOFTRDMA_NAMESPACE", ("ut" + std::to_string(getpid())).c_str(), 1);
  }
};

GsiDatagram Datagram(const std::array<uint8_t, 256>& mad) {
  GsiDatagram d;
  d.remote_gid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2};
  d.local_gid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  d.remote_qpn = 0x123456;
  d.pkey = 0xffff;
  d.qkey = kGsiQkeyValue;
  d.payload = mad;
  return d;
}

TEST_F(GsiForwarder, RequestReachesTheListenersSocketInAnEnvelope) {
  const uint16_t port = TestPort(1);
  CmSocket listener(CmSocketName(0x0106, port));
  ASSERT_TRUE(listener.bound());
  auto req = Mad(0x0010);
  Put(&req, 32, (uint64_t(0x0106) << 16) | port, 8);
  GsiDatagram datagram = Datagram(req);
  uint64_t before = GsiForwarderCountersNow().forwarded;
  Status status = ForwardGsiDatagram(datagram);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(GsiForwarderCountersNow().forwarded, before + 1);

  uint8_t buf[kGsiEnvelopeSize + 16];
  ASSERT_EQ(listener.Read(buf, sizeof(buf)), ssize_t(kGsiEnvelopeSize));
  GsiEnvelope envelope;
  std::span<const uint8_t> mad;
  ASSERT_TRUE(DecodeGsiEnvelope(std::span<const uint8_t>(buf, kGsiEnvelopeSize), &envelope, &mad));
  EXPECT_EQ(envelope.remote_gid, datagram.remote_gid);
  EXPECT_EQ(envelope.local_gid, datagram.local_gid);
  EXPECT_EQ(envelope.remote_qpn, 0x123456u);
  EXPECT_EQ(0, std::memcmp(mad.data(), req.data(), req.size()));
}

TEST_F(GsiForwarder, ReplyReachesTheOwnerOfTheCommId) {
  const uint16_t socket_number = uint16_t(TestPort(2) | 1);
  CmSocket owner(CmSocketName(kCmProcessPortSpace, socket_number));
  ASSERT_TRUE(owner.bound());
  auto rep = Mad(0x0013);
  Put(&rep, 24, 0x55556666, 4);                         // the sender's comm id
  Put(&rep, 28, MakeCommId(socket_number, 0x0042), 4);  // ours
  ASSERT_TRUE(ForwardGsiDatagram(Datagram(rep)).ok());
  uint8_t buf[kGsiEnvelopeSize + 16];
  EXPECT_EQ(owner.Read(buf, sizeof(buf)), ssize_t(kGsiEnvelopeSize));
}

TEST_F(GsiForwarder, DropsAndCountsWhatItCannotDeliver) {
  auto rtu = Mad(0x0014);
  // Nobody holds the socket this comm id names.
  Put(&rtu, 28, MakeCommId(uint16_t(TestPort(3) | 1), 1), 4);
  GsiForwarderCounters before = GsiForwarderCountersNow();
  EXPECT_EQ(ForwardGsiDatagram(Datagram(rtu)).code(), ECONNREFUSED);
  EXPECT_EQ(GsiForwarderCountersNow().dropped_nobody, before.dropped_nobody + 1);

  GsiDatagram wrong_qkey = Datagram(rtu);
  wrong_qkey.qkey = 0x11111111;
  EXPECT_EQ(ForwardGsiDatagram(wrong_qkey).code(), EINVAL);
  EXPECT_EQ(GsiForwarderCountersNow().dropped_bad_qkey, before.dropped_bad_qkey + 1);

  // Nothing to answer for anything but a request.
  bool replied = false;
  EXPECT_EQ(ForwardGsiDatagram(Datagram(rtu), [&](const GsiDatagram&) { replied = true; }).code(),
            ECONNREFUSED);
  EXPECT_FALSE(replied);

  auto not_cm = rtu;
  not_cm[1] = 0x01;  // SubnMgmt
  EXPECT_EQ(ForwardGsiDatagram(Datagram(not_cm)).code(), EBADMSG);
  GsiDatagram short_one = Datagram(rtu);
  short_one.payload = short_one.payload.first(100);
  EXPECT_EQ(ForwardGsiDatagram(short_one).code(), EBADMSG);
  EXPECT_EQ(GsiForwarderCountersNow().dropped_not_cm, before.dropped_not_cm + 2);
  EXPECT_EQ(GsiForwarderCountersNow().forwarded, before.forwarded);
}

TEST_F(GsiForwarder, RequestForAnUnboundPortIsAnsweredToTheRequestersQp1) {
  auto req = Mad(0x0010);
  Put(&req, 8, 0x0102030405060708, 8);  // transaction id
  Put(&req, 24, 0x0abc0001, 4);         // the requester's comm id
  Put(&req, 32, (uint64_t(0x0106) << 16) | uint16_t(TestPort(4) | 1), 8);
  GsiDatagram datagram = Datagram(req);
  int replies = 0;
  GsiDatagram answer;
  std::array<uint8_t, 256> answer_mad{};
  uint64_t before = GsiForwarderCountersNow().answered_no_listener;
  EXPECT_EQ(ForwardGsiDatagram(datagram,
                               [&](const GsiDatagram& a) {
                                 ++replies;
                                 answer = a;
                                 ASSERT_EQ(a.payload.size(), answer_mad.size());
                                 std::memcpy(answer_mad.data(), a.payload.data(), 256);
                               })
                .code(),
            ECONNREFUSED);
  ASSERT_EQ(replies, 1);
  EXPECT_EQ(GsiForwarderCountersNow().answered_no_listener, before + 1);
  EXPECT_EQ(answer.remote_gid, datagram.remote_gid);  // back to the requester
  EXPECT_EQ(answer.local_gid, datagram.local_gid);    // from the address it asked
  EXPECT_EQ(answer.qkey, kGsiQkeyValue);
  // REJ (0x0012), same transaction, remote comm id = the requester's, reason 8.
  EXPECT_EQ(answer_mad[17], 0x12);
  EXPECT_EQ(0, std::memcmp(answer_mad.data() + 8, req.data() + 8, 8));
  EXPECT_EQ(0, std::memcmp(answer_mad.data() + 28, req.data() + 24, 4));
  EXPECT_EQ(answer_mad[34], 0);
  EXPECT_EQ(answer_mad[35], 8);
}

}  // namespace
}  // namespace softrdma
