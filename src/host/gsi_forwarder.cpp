#include "host/gsi_forwarder.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "util/gsi_route.h"

namespace softrdma {
namespace {

struct AtomicCounters {
  std::atomic<uint64_t> forwarded{0};
  std::atomic<uint64_t> dropped_bad_qkey{0};
  std::atomic<uint64_t> dropped_not_cm{0};
  std::atomic<uint64_t> dropped_nobody{0};
  std::atomic<uint64_t> dropped_queue_full{0};
  std::atomic<uint64_t> answered_no_listener{0};
};

AtomicCounters& Counters() {
  static AtomicCounters counters;
  return counters;
}

void Count(std::atomic<uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

// One unbound datagram socket per process to send from: the receiver learns
// the forwarder's credentials from the kernel (SO_PASSCRED) and needs no
// reply address (the envelope carries the sender's).
int SenderSocket() {
  static int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  return fd;
}

}  // namespace

GsiForwarderCounters GsiForwarderCountersNow() {
  AtomicCounters& c = Counters();
  return {c.forwarded.load(std::memory_order_relaxed),
          c.dropped_bad_qkey.load(std::memory_order_relaxed),
          c.dropped_not_cm.load(std::memory_order_relaxed),
          c.dropped_nobody.load(std::memory_order_relaxed),
          c.dropped_queue_full.load(std::memory_order_relaxed),
          c.answered_no_listener.load(std::memory_order_relaxed)};
}

Status ForwardGsiDatagram(const GsiDatagram& datagram, const GsiReply& reply) {
  AtomicCounters& counters = Counters();
  if (datagram.qkey != kGsiQkeyValue) {
    Count(counters.dropped_bad_qkey);
    return Status::Error(EINVAL, "GSI datagram with a Q_Key other than 0x80010000");
  }
  std::string to;
  Status route = CmSocketForMad(datagram.payload, &to);
  if (!route.ok()) {
    Count(counters.dropped_not_cm);
    return route;
  }
  GsiEnvelope envelope;
  envelope.remote_gid = datagram.remote_gid;
  envelope.local_gid = datagram.local_gid;
  envelope.remote_qpn = datagram.remote_qpn;
  envelope.pkey = datagram.pkey;
  uint8_t bytes[kGsiEnvelopeSize];
  EncodeGsiEnvelope(envelope, datagram.payload.first<kGsiMadSize>(), bytes);

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::min(to.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, to.data(), len);  // abstract: sun_path[0] = 0
  auto addr_len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + len);
  int fd = SenderSocket();
  if (fd < 0) return Status::Error(errno, "socket(AF_UNIX)");
  if (sendto(fd, bytes, sizeof(bytes), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), addr_len) <
      0) {
    int err = errno;
    Count(err == EAGAIN ? counters.dropped_queue_full : counters.dropped_nobody);
    uint8_t answer[kGsiMadSize];
    if ((err == ECONNREFUSED || err == ENOENT) && reply &&
        NoListenerAnswer(datagram.payload, answer)) {
      GsiDatagram back;
      back.remote_gid = datagram.remote_gid;  // to the requester's QP1
      back.local_gid = datagram.local_gid;    // from the address it asked
      back.remote_qpn = kGsiQpn;              // its QP1
      back.pkey = datagram.pkey;
      back.qkey = kGsiQkeyValue;
      back.payload = answer;
      reply(back);
      Count(counters.answered_no_listener);
    }
    return Status::Error(err, "forward to " + to);
  }
  Count(counters.forwarded);
  return Status::Ok();
}

}  // namespace softrdma
