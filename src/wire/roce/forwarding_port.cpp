#include "wire/roce/forwarding_port.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace softrdma::roce {
namespace {

// What precedes a forwarded datagram: where it came from and to, as the
// receiving process's UDP socket saw it (the ICRC check needs both).
struct ForwardHeader {
  uint32_t magic;
  uint16_t from_port;
  uint16_t reserved;
  in6_addr from;
  in6_addr local;
};
constexpr uint32_t kForwardMagic = 0x52465744;  // "RFWD"
// The longest RoCE packet is 4096 + 52 header bytes + pad + ICRC; anything
// longer is no RoCE packet and is not forwarded whole (dropped as truncated).
constexpr size_t kMaxForwarded = 9000;
constexpr int kReadBatch = 8;
constexpr size_t kReadSlotBytes = sizeof(ForwardHeader) + kMaxForwarded;

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
                            std::unique_ptr<ForwardingPort>* out) {
  std::unique_ptr<ForwardingPort> port(new ForwardingPort());
  port->inner_ = std::move(inner);
  port->prefix_ = prefix;
  port->foreign_owner_ = std::move(foreign_owner);
  port->uid_ = geteuid();
  port->read_buffers_.reset(new uint8_t[kReadBatch * kReadSlotBytes]);
  port->socket_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (port->socket_fd_ < 0) return Status::Error(errno, "socket(AF_UNIX)");
  const int one = 1;
  setsockopt(port->socket_fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
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
  *out = std::move(port);
  return Status::Ok();
}

ForwardingPort::~ForwardingPort() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (socket_fd_ >= 0) close(socket_fd_);
}

void ForwardingPort::Forward(uint32_t owner, const InDatagram& d) {
  ForwardHeader header{};
  header.magic = kForwardMagic;
  header.from_port = d.from.port;
  header.from = d.from.addr;
  header.local = d.local;
  iovec parts[2] = {{&header, sizeof header}, {const_cast<uint8_t*>(d.data), d.len}};
  sockaddr_un address;
  msghdr message{};
  message.msg_name = &address;
  message.msg_namelen = AbstractAddress(prefix_ + std::to_string(owner), &address);
  message.msg_iov = parts;
  message.msg_iovlen = 2;
  // Never waits: a full or vanished owner loses the datagram, as a switch
  // would, and the sender's retransmission recovers it.
  if (d.len <= kMaxForwarded && sendmsg(socket_fd_, &message, MSG_DONTWAIT) >= 0)
    ++counters_.forwarded;
  else
    ++counters_.forward_failed;
}

int ForwardingPort::ReadForwarded(const DatagramSink& sink, int max) {
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
    const int got = recvmmsg(socket_fd_, messages, kReadBatch, MSG_DONTWAIT, nullptr);
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
      ForwardHeader header;
      if (!same_user || (h.msg_flags & MSG_TRUNC) || messages[i].msg_len < sizeof header) {
        ++counters_.refused;
        continue;
      }
      memcpy(&header, buffers[i], sizeof header);
      if (header.magic != kForwardMagic) {
        ++counters_.refused;
        continue;
      }
      InDatagram d;
      d.from.addr = header.from;
      d.from.port = header.from_port;
      d.local = header.local;
      d.data = buffers[i] + sizeof header;
      d.len = uint32_t(messages[i].msg_len - sizeof header);
      sink(d);
      ++delivered;
      ++counters_.received_forwarded;
    }
    if (got < kReadBatch) break;
  }
  return delivered;
}

int ForwardingPort::Poll(const DatagramSink& sink, int max) {
  if (max <= 0) return 0;
  int delivered = ReadForwarded(sink, max);
  auto demultiplex = [&](const InDatagram& d) {
    // BTH bytes 5-7: DestQP. QP1 (CM MADs) stays: the CM's router finds the
    // listener from the MAD itself. A datagram too short for a BTH is the
    // transport's to count.
    if (d.len >= 12) {
      const uint32_t qpn = uint32_t(d.data[5]) << 16 | uint32_t(d.data[6]) << 8 | d.data[7];
      if (qpn != 1) {
        if (const uint32_t owner = foreign_owner_(qpn); owner != 0) {
          Forward(owner, d);
          return;
        }
      }
    }
    sink(d);
    ++delivered;
  };
  if (delivered < max) inner_->Poll(demultiplex, max - delivered);
  return delivered;
}

}  // namespace softrdma::roce
