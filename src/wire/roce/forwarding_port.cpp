#include "wire/roce/forwarding_port.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "util/clock.h"

namespace softrdma::roce {
namespace {

// What precedes each forwarded datagram: where it came from and to, as the
// receiving process's UDP socket saw it (the ICRC check needs both), and its
// length. One Unix datagram carries the datagrams a poll forwards to one
// destination, back to back (a socket queues 10 Unix datagrams at most,
// net.unix.max_dgram_qlen: one per RoCE datagram lost a burst of 64 packets).
struct ForwardHeader {
  uint32_t magic;
  uint16_t from_port;
  uint16_t length;  // of the datagram that follows
  in6_addr from;
  in6_addr local;
};
constexpr uint32_t kForwardMagic = 0x32465752;  // "RWF2"
// The longest RoCE packet is 4096 + 52 header bytes + pad + ICRC; anything
// longer is no RoCE packet and is not forwarded (counted as failed).
constexpr size_t kMaxForwarded = 9000;
// One Unix datagram: a poll's worth of forwards to one destination.
constexpr size_t kMaxBatchBytes = 65536;
constexpr int kReadBatch = 8;
constexpr size_t kReadSlotBytes = kMaxBatchBytes;
constexpr int kSocketBufferBytes = 4 << 20;
// How often a process without the gateway tries to take it: the gap after
// its holder exits, during which datagrams for the range are lost (the
// senders retransmit; a QP's first retransmission comes after its timeout).
constexpr uint64_t kGatewayRetryNs = 100'000'000;

uint32_t DestQp(const InDatagram& d) {
  return uint32_t(d.data[5]) << 16 | uint32_t(d.data[6]) << 8 | d.data[7];
}

socklen_t AbstractAddress(const std::string& name, sockaddr_un* out) {
  memset(out, 0, sizeof *out);
  out->sun_family = AF_UNIX;
  const size_t length = std::min(name.size(), sizeof out->sun_path - 1);
  memcpy(out->sun_path + 1, name.data(), length);
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + length);
}

}  // namespace

Status ForwardingPort::Open(std::unique_ptr<PacketPort> inner, const std::string& prefix,
                            uint32_t self_id, ForeignOwner foreign_owner,
                            std::unique_ptr<ForwardingPort>* out, const Gateway* gateway) {
  std::unique_ptr<ForwardingPort> port(new ForwardingPort());
  port->inner_ = std::move(inner);
  port->prefix_ = prefix;
  port->foreign_owner_ = std::move(foreign_owner);
  if (gateway) {
    port->has_gateway_ = true;
    port->gateway_ = *gateway;
  }
  port->uid_ = geteuid();
  port->read_buffers_.reset(new uint8_t[kReadBatch * kReadSlotBytes]);
  port->socket_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (port->socket_fd_ < 0) return Status::Error(errno, "socket(AF_UNIX)");
  const int one = 1;
  setsockopt(port->socket_fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  // A Unix datagram counts against its sender's buffer until it is read:
  // room for the queue of batches (above wmem_max only with CAP_NET_ADMIN).
  if (setsockopt(port->socket_fd_, SOL_SOCKET, SO_SNDBUFFORCE, &kSocketBufferBytes,
                 sizeof kSocketBufferBytes) != 0)
    setsockopt(port->socket_fd_, SOL_SOCKET, SO_SNDBUF, &kSocketBufferBytes,
               sizeof kSocketBufferBytes);
  sockaddr_un address;
  const std::string name = prefix + std::to_string(self_id);
  const socklen_t length = AbstractAddress(name, &address);
  if (bind(port->socket_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0)
    return Status::Error(errno, "bind @" + name + ": " + strerror(errno));
  port->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (port->epoll_fd_ < 0) return Status::Error(errno, "epoll_create1");
  epoll_event event{};
  event.events = EPOLLIN;
  if (epoll_ctl(port->epoll_fd_, EPOLL_CTL_ADD, port->socket_fd_, &event) != 0)
    return Status::Error(errno, "epoll_ctl");
  if (const int inner_fd = port->inner_->ReadableFd(); inner_fd >= 0) {
    if (epoll_ctl(port->epoll_fd_, EPOLL_CTL_ADD, inner_fd, &event) != 0)
      return Status::Error(errno, "epoll_ctl");
  }
  if (port->has_gateway_) {
    port->unix_epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (port->unix_epoll_fd_ < 0) return Status::Error(errno, "epoll_create1");
    epoll_event own{};
    own.events = EPOLLIN;
    own.data.fd = port->socket_fd_;
    if (epoll_ctl(port->unix_epoll_fd_, EPOLL_CTL_ADD, port->socket_fd_, &own) != 0)
      return Status::Error(errno, "epoll_ctl");
    port->TryHoldGateway();
  }
  *out = std::move(port);
  return Status::Ok();
}

ForwardingPort::~ForwardingPort() {
  if (gateway_fd_ >= 0) close(gateway_fd_);
  if (unix_epoll_fd_ >= 0) close(unix_epoll_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (socket_fd_ >= 0) close(socket_fd_);
}

void ForwardingPort::TryHoldGateway() {
  const uint64_t now = NowNs();
  if (gateway_fd_ >= 0 || now < next_gateway_try_ns_) return;
  next_gateway_try_ns_ = now + kGatewayRetryNs;
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_un address;
  const socklen_t length =
      AbstractAddress(gateway_.prefix + std::to_string(gateway_.own_slot), &address);
  epoll_event event{};
  event.events = EPOLLIN;
  // EADDRINUSE: another process of the registry holds it (or, see
  // design.md "Security", a process of another user squats the name).
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    close(fd);
    return;
  }
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0 ||
      epoll_ctl(unix_epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    return;
  }
  gateway_fd_ = fd;
}

bool ForwardingPort::RouteAway(uint32_t qpn, const InDatagram& d) {
  // QP1 (CM MADs) stays: the CM's router finds the listener from the MAD
  // itself. So does multicast (whoever attached to the group here).
  if (qpn == 1 || qpn == kMulticastQpn) return false;
  if (has_gateway_) {
    const uint32_t slot = gateway_.slot_of(qpn);
    if (slot != gateway_.own_slot) {
      Queue(gateway_.prefix + std::to_string(slot), true, d);
      return true;
    }
  }
  if (const uint32_t owner = foreign_owner_(qpn); owner != 0) {
    Forward(owner, d);
    return true;
  }
  return false;
}

void ForwardingPort::Queue(const std::string& name, bool gateway, const InDatagram& d) {
  uint64_t& failed = gateway ? counters_.to_gateway_failed : counters_.forward_failed;
  if (d.len > kMaxForwarded) {
    ++failed;
    return;
  }
  Batch* batch = nullptr;
  for (Batch& b : pending_)
    if (b.count > 0 && b.name == name) batch = &b;
  const size_t record = sizeof(ForwardHeader) + d.len;
  if (batch && batch->bytes.size() + record > kMaxBatchBytes) {
    Flush(*batch);
    batch = nullptr;
  }
  if (!batch) {
    for (Batch& b : pending_)
      if (b.count == 0) batch = &b;
    if (!batch) batch = &pending_.emplace_back();
    batch->name = name;
    batch->gateway = gateway;
    batch->bytes.clear();
  }
  ForwardHeader header{};
  header.magic = kForwardMagic;
  header.from_port = d.from.port;
  header.length = uint16_t(d.len);
  header.from = d.from.addr;
  header.local = d.local;
  const auto* h = reinterpret_cast<const uint8_t*>(&header);
  batch->bytes.insert(batch->bytes.end(), h, h + sizeof header);
  batch->bytes.insert(batch->bytes.end(), d.data, d.data + d.len);
  ++batch->count;
}

void ForwardingPort::Flush(Batch& batch) {
  if (batch.count == 0) return;
  sockaddr_un address;
  const socklen_t length = AbstractAddress(batch.name, &address);
  // Never waits: a full or vanished owner loses the datagrams, as a switch
  // would, and the senders' retransmissions recover them.
  const bool sent = sendto(socket_fd_, batch.bytes.data(), batch.bytes.size(), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&address), length) >= 0;
  if (batch.gateway)
    (sent ? counters_.to_gateway : counters_.to_gateway_failed) += batch.count;
  else
    (sent ? counters_.forwarded : counters_.forward_failed) += batch.count;
  ++(sent ? counters_.batches_sent : counters_.batches_failed);
  batch.count = 0;
}

void ForwardingPort::FlushAll() {
  for (Batch& b : pending_) Flush(b);
}

void ForwardingPort::Forward(uint32_t owner, const InDatagram& d) {
  Queue(prefix_ + std::to_string(owner), false, d);
}

int ForwardingPort::ReadForwarded(int fd, bool gateway, const DatagramSink& sink, int max) {
  int delivered = 0;
  while (delivered < max) {
    uint8_t* buffers[kReadBatch];
    alignas(cmsghdr) char control[kReadBatch][CMSG_SPACE(sizeof(ucred))];
    iovec iovs[kReadBatch];
    mmsghdr messages[kReadBatch];
    for (int i = 0; i < kReadBatch; ++i) {
      buffers[i] = read_buffers_.get() + size_t(i) * kReadSlotBytes;
      iovs[i] = {buffers[i], kReadSlotBytes};
      memset(&messages[i], 0, sizeof messages[i]);
      messages[i].msg_hdr.msg_iov = &iovs[i];
      messages[i].msg_hdr.msg_iovlen = 1;
      messages[i].msg_hdr.msg_control = control[i];
      messages[i].msg_hdr.msg_controllen = sizeof control[i];
    }
    const int got = recvmmsg(fd, messages, kReadBatch, MSG_DONTWAIT, nullptr);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      const msghdr& h = messages[i].msg_hdr;
      bool same_user = false;
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
          ucred credentials;
          memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
          same_user = credentials.uid == uid_;
        }
      }
      // The gateway takes any user's: what another user's process hands on
      // is as trusted as what the network brings.
      if ((!same_user && !gateway) || (h.msg_flags & MSG_TRUNC)) {
        ++(gateway ? counters_.gateway_refused : counters_.refused);
        continue;
      }
      size_t at = 0;
      const size_t end = messages[i].msg_len;
      while (at < end) {
        ForwardHeader header;
        if (end - at < sizeof header) {
          ++(gateway ? counters_.gateway_refused : counters_.refused);
          break;
        }
        memcpy(&header, buffers[i] + at, sizeof header);
        at += sizeof header;
        if (header.magic != kForwardMagic || header.length > end - at) {
          ++(gateway ? counters_.gateway_refused : counters_.refused);
          break;
        }
        InDatagram d;
        d.from.addr = header.from;
        d.from.port = header.from_port;
        d.local = header.local;
        d.data = buffers[i] + at;
        d.len = header.length;
        at += header.length;
        if (gateway) {
          // Only our range's (never on to a third registry: no loops), and
          // on to the process of the registry that owns the QPN.
          if (d.len < 12 || gateway_.slot_of(DestQp(d)) != gateway_.own_slot) {
            ++counters_.gateway_refused;
            continue;
          }
          ++counters_.via_gateway;
          if (const uint32_t owner = foreign_owner_(DestQp(d)); owner != 0) {
            Forward(owner, d);
            continue;
          }
        } else {
          ++counters_.received_forwarded;
        }
        sink(d);
        ++delivered;
      }
    }
    if (got < kReadBatch) break;
  }
  return delivered;
}

int ForwardingPort::Poll(const DatagramSink& sink, int max) {
  if (max <= 0) return 0;
  if (has_gateway_ && gateway_fd_ < 0) TryHoldGateway();
  int delivered = 0;
  if (gateway_fd_ < 0) {
    delivered = ReadForwarded(socket_fd_, false, sink, max);
  } else {
    // Two Unix sockets: one epoll_wait says which to read, so an empty poll
    // costs no more system calls than without the gateway.
    epoll_event ready[2];
    const int n = epoll_wait(unix_epoll_fd_, ready, 2, 0);
    for (int i = 0; i < n && delivered < max; ++i) {
      const bool gateway = ready[i].data.fd == gateway_fd_;
      delivered += ReadForwarded(ready[i].data.fd, gateway, sink, max - delivered);
    }
  }
  auto demultiplex = [&](const InDatagram& d) {
    // BTH bytes 5-7: DestQP. A datagram too short for a BTH is the
    // transport's to count.
    if (d.len >= 12 && RouteAway(DestQp(d), d)) return;
    sink(d);
    ++delivered;
  };
  if (delivered < max) inner_->Poll(demultiplex, max - delivered);
  FlushAll();
  return delivered;
}

}  // namespace softrdma::roce
