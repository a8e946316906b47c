#include "wire/roce/udp_port.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/clock.h"
#include "wire/roce/icrc.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif

namespace softrdma::roce {
namespace {

constexpr int kSendBatch = 64;                // datagrams per sendmmsg
constexpr int kReadBatch = 16;                // messages per recvmmsg
constexpr uint32_t kReadBufferBytes = 65536;  // a GRO read holds up to 64 KiB
constexpr uint32_t kMaxGsoBytes = 65000;      // below the 64 KiB UDP limit with headers
constexpr int kMaxGsoSegments = 64;           // the kernel's UDP_MAX_SEGMENTS is >= 64
constexpr size_t kMaxSourcePortSockets = 256;
constexpr int kSendBufferBytes = 4 << 20;
// The kernel doubles it: 32 MiB may wait unread. A sender faster than its
// receiver (UC, UD, and RC within its window) overflows what a receiver
// that copies every payload once more cannot drain yet: with 4 MiB,
// ib_send_bw -c UC -s 65536 -n 200 between two namespace hosts lost 127 of
// its 400 GSO datagrams (RcvbufErrors), UC never resends, and the server
// waited for its 200 receives until its timeout. 32 MiB holds that whole
// burst (12.8 MB). A limit, not an allocation; above rmem_max only with
// CAP_NET_ADMIN (docs/design.md "The port").
constexpr int kReceiveBufferBytes = 16 << 20;

bool IsIpv4(const in6_addr& a) {
  return IN6_IS_ADDR_V4MAPPED(&a);
}

in6_addr MappedIpv4(in_addr v4) {
  in6_addr a{};
  a.s6_addr[10] = a.s6_addr[11] = 0xff;
  memcpy(&a.s6_addr[12], &v4, 4);
  return a;
}

bool IsUnspecified(const in6_addr& a) {
  if (IsIpv4(a)) {
    uint32_t v4;
    memcpy(&v4, &a.s6_addr[12], 4);
    return v4 == 0;
  }
  return IN6_IS_ADDR_UNSPECIFIED(&a);
}

bool SameAddress(const in6_addr& a, const in6_addr& b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

// Datagrams that SocketFor sends from the same socket, known without its search.
bool SameSendingSocket(const OutDatagram& a, const OutDatagram& b) {
  return a.src_port == b.src_port && IsIpv4(a.to.addr) == IsIpv4(b.to.addr) &&
         SameAddress(a.from, b.from);
}

socklen_t ToSockaddr(const in6_addr& address, uint16_t port, sockaddr_storage* out) {
  memset(out, 0, sizeof *out);
  if (IsIpv4(address)) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(out);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    memcpy(&v4->sin_addr, &address.s6_addr[12], 4);
    return sizeof *v4;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  v6->sin6_addr = address;
  return sizeof *v6;
}

IpEndpoint FromSockaddr(const sockaddr_storage& s) {
  IpEndpoint e;
  if (s.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&s);
    e.addr = MappedIpv4(v4->sin_addr);
    e.port = ntohs(v4->sin_port);
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&s);
    e.addr = v6->sin6_addr;
    e.port = ntohs(v6->sin6_port);
  }
  return e;
}

void SetInt(int fd, int level, int name, int value) {
  setsockopt(fd, level, name, &value, sizeof value);
}

// A UDP socket bound to (address, port), set up for RoCEv2 (see udp_port.h).
// Returns the fd or a negative errno.
int OpenRoceSocket(const in6_addr& address, uint16_t port) {
  const bool ipv4 = IsIpv4(address);
  const int fd =
      socket(ipv4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) return -errno;
  auto fail = [fd]() {
    const int error = errno;
    close(fd);
    return -error;
  };
  const int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) return fail();
  if (ipv4) {
    // DF and ID 0 on an unconnected socket (a GSO send's segments: 0, 1, 2...):
    // the IDs the ICRCs are computed for. The UDP checksum is sent (the
    // kernel refuses GSO with SO_NO_CHECK).
    const int pmtu = IP_PMTUDISC_DO;
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) return fail();
    SetInt(fd, IPPROTO_IP, IP_PKTINFO, 1);
  } else {
    SetInt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    SetInt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
    SetInt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, 1);
    SetInt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
  }
  SetInt(fd, IPPROTO_UDP, UDP_GRO, 1);  // absent on old kernels: plain reads then
  // Above rmem_max only with CAP_NET_ADMIN (the FORCE variants); best effort.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &kReceiveBufferBytes, sizeof(int)) != 0)
    SetInt(fd, SOL_SOCKET, SO_RCVBUF, kReceiveBufferBytes);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &kSendBufferBytes, sizeof(int)) != 0)
    SetInt(fd, SOL_SOCKET, SO_SNDBUF, kSendBufferBytes);
  sockaddr_storage local;
  const socklen_t length = ToSockaddr(address, port, &local);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), length) != 0) return fail();
  return fd;
}

std::vector<in6_addr> LocalAddresses() {
  std::vector<in6_addr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    in6_addr a;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      a = MappedIpv4(reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      a = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&a) || IN6_IS_ADDR_LOOPBACK(&a)) continue;
    } else {
      continue;
    }
    if (std::none_of(out.begin(), out.end(), [&](const in6_addr& b) { return SameAddress(a, b); }))
      out.push_back(a);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

Status ParseAddressList(const std::string& text, std::vector<in6_addr>* out) {
  out->clear();
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) {
      in6_addr a{};
      in_addr v4{};
      if (inet_pton(AF_INET, item.c_str(), &v4) == 1) {
        a = MappedIpv4(v4);
      } else if (inet_pton(AF_INET6, item.c_str(), &a) != 1) {
        return Status::Error(EINVAL, "not an IPv4 or IPv6 address: '" + item + "'");
      }
      out->push_back(a);
    }
    start = end + 1;
  }
  return Status::Ok();
}

uint32_t RoceMtuForInterfaceMtu(uint32_t interface_mtu) {
  constexpr uint32_t kMaxHeaders = 80;  // rxe's RXE_MAX_HDR_LENGTH: the same rule as a NIC port
  if (interface_mtu < 256 + kMaxHeaders) return 0;
  uint32_t mtu = 4096;
  while (mtu > interface_mtu - kMaxHeaders) mtu /= 2;
  return mtu;
}

uint32_t InterfaceMtuOfAddress(const in6_addr& local) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  std::string name;
  for (ifaddrs* ifa = list; ifa && name.empty(); ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr) continue;
    in6_addr a{};
    if (ifa->ifa_addr->sa_family == AF_INET)
      a = MappedIpv4(reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr);
    else if (ifa->ifa_addr->sa_family == AF_INET6)
      a = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
    else
      continue;
    if (SameAddress(a, local)) name = ifa->ifa_name;
  }
  freeifaddrs(list);
  if (name.empty() || name.size() >= IFNAMSIZ) return 0;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq request{};
  memcpy(request.ifr_name, name.c_str(), name.size());
  const int rc = ioctl(fd, SIOCGIFMTU, &request);
  close(fd);
  return rc == 0 && request.ifr_mtu > 0 ? uint32_t(request.ifr_mtu) : 0;
}

Status UdpPort::Open(const UdpPortOptions& options, std::unique_ptr<UdpPort>* out) {
  std::unique_ptr<UdpPort> port(new UdpPort());
  port->port_ = options.port;
  port->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (port->epoll_fd_ < 0) return Status::Error(errno, "epoll_create1");
  const std::vector<in6_addr> addresses =
      options.addresses.empty() ? LocalAddresses() : options.addresses;
  int last_error = EADDRNOTAVAIL;
  std::string failures;
  for (const in6_addr& address : addresses) {
    const int fd = OpenRoceSocket(address, port->port_);
    char text[INET6_ADDRSTRLEN] = "?";
    if (IsIpv4(address))
      inet_ntop(AF_INET, &address.s6_addr[12], text, sizeof text);
    else
      inet_ntop(AF_INET6, &address, text, sizeof text);
    if (fd < 0) {
      last_error = -fd;
      failures += std::string(failures.empty() ? "" : ", ") + text + ": " + strerror(-fd);
      // Held by another user's group (or another program): send from a
      // port of our own there; what comes to the address is theirs to hand
      // on (the gateway, forwarding_port.h).
      if (-fd == EADDRINUSE && port->port_ != 0) {
        if (const int send_fd = OpenRoceSocket(address, 0); send_fd >= 0) {
          sockaddr_storage bound;
          socklen_t length = sizeof bound;
          getsockname(send_fd, reinterpret_cast<sockaddr*>(&bound), &length);
          port->send_only_sockets_.push_back(
              {send_fd, address, IsIpv4(address), FromSockaddr(bound).port});
          port->send_only_bound_.push_back(address);
          port->late_bound_.push_back(false);
        }
      }
      continue;
    }
    if (port->port_ == 0) {  // the kernel chose: the other addresses take the same port
      sockaddr_storage bound;
      socklen_t length = sizeof bound;
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      port->port_ = FromSockaddr(bound).port;
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = port->sockets_.size();
    epoll_ctl(port->epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    port->sockets_.push_back({fd, address, IsIpv4(address), port->port_});
    port->bound_.push_back(address);
  }
  if (port->sockets_.empty() && port->send_only_sockets_.empty())
    return Status::Error(last_error,
                         "cannot bind UDP port " + std::to_string(options.port) +
                             (failures.empty() ? ": no local address" : ": " + failures));
  port->receive_buffers_.reset(new uint8_t[size_t{kReadBatch} * kReadBufferBytes]);
  *out = std::move(port);
  return Status::Ok();
}

UdpPort::~UdpPort() {
  for (const Socket& s : sockets_) close(s.fd);
  for (const Socket& s : send_only_sockets_) close(s.fd);
  for (const Socket& s : late_sockets_) close(s.fd);
  for (const auto& [key, fd] : source_port_fds_)
    if (fd >= 0) close(fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool UdpPort::AddressIsOurs(const in6_addr& address) const {
  for (const in6_addr& bound : bound_) {
    if (SameAddress(bound, address)) return true;
    if (IsUnspecified(bound) && IsIpv4(bound) == IsIpv4(address)) return true;
  }
  return false;
}

uint16_t UdpPort::SourcePort(const in6_addr& from) const {
  if (AddressIsOurs(from)) return port_;
  for (const Socket& s : send_only_sockets_)
    if (SameAddress(s.address, from)) return s.port;
  return port_;
}

UdpPort::Counters UdpPort::counters() const {
  Counters c;
  c.sent = counters_.sent.load(std::memory_order_relaxed);
  c.send_calls = counters_.send_calls.load(std::memory_order_relaxed);
  c.gso_batches = counters_.gso_batches.load(std::memory_order_relaxed);
  c.received = counters_.received.load(std::memory_order_relaxed);
  c.receive_calls = counters_.receive_calls.load(std::memory_order_relaxed);
  c.gro_batches = counters_.gro_batches.load(std::memory_order_relaxed);
  c.source_port_fallbacks = counters_.source_port_fallbacks.load(std::memory_order_relaxed);
  c.late_binds = counters_.late_binds.load(std::memory_order_relaxed);
  return c;
}

int UdpPort::SourcePortSocket(const Socket& base, uint16_t src_port) {
  std::lock_guard<std::mutex> lock(source_port_mutex_);
  // Receiving sockets first, then the send-only ones: one index for both.
  const bool receiving = &base >= sockets_.data() && &base < sockets_.data() + sockets_.size();
  const size_t index = receiving ? size_t(&base - sockets_.data())
                                 : sockets_.size() + size_t(&base - send_only_sockets_.data());
  const auto key = std::make_pair(index, src_port);
  auto it = source_port_fds_.find(key);
  if (it != source_port_fds_.end()) return it->second;
  if (source_port_fds_.size() >= kMaxSourcePortSockets) return -1;
  // Packets sent to this port are not ours to read (RoCE sends to 4791):
  // the socket only sends, so it is not in the epoll set.
  const int fd = OpenRoceSocket(base.address, src_port);
  source_port_fds_[key] = fd >= 0 ? fd : -1;
  return fd >= 0 ? fd : -1;
}

int UdpPort::SocketFor(const OutDatagram& d) {
  const bool ipv4 = IsIpv4(d.to.addr);
  const Socket* chosen = nullptr;
  const bool any_source = IsUnspecified(d.from);
  for (const std::vector<Socket>* set : {&sockets_, &send_only_sockets_}) {
    for (const Socket& s : *set) {
      if (s.ipv4 != ipv4) continue;
      if (any_source || SameAddress(s.address, d.from)) {
        chosen = &s;
        break;
      }
      if (!chosen && IsUnspecified(s.address)) chosen = &s;  // a wildcard socket sends from any
    }
    if (chosen && (any_source || SameAddress(chosen->address, d.from))) break;
  }
  if (!chosen) return -EADDRNOTAVAIL;
  if (d.src_port != 0 && d.src_port != chosen->port) {
    const int fd = SourcePortSocket(*chosen, d.src_port);
    if (fd >= 0) return fd;
    counters_.source_port_fallbacks.fetch_add(1, std::memory_order_relaxed);
  }
  return chosen->fd;
}

int UdpPort::Send(const OutDatagram* datagrams, int n) {
  int done = 0;
  while (done < n) {
    const int fd = SocketFor(datagrams[done]);
    if (fd < 0) return done > 0 ? done : fd;
    // SocketFor depends on the source address and port and the family only:
    // a QP's packets share them, and skip its search of the sockets.
    int run = 1;
    while (done + run < n && run < kSendBatch &&
           (SameSendingSocket(datagrams[done], datagrams[done + run]) ||
            SocketFor(datagrams[done + run]) == fd))
      ++run;
    const int sent = SendBatch(fd, IsIpv4(datagrams[done].to.addr), datagrams + done, run);
    if (sent < 0) return done > 0 ? done : sent;
    done += sent;
    if (sent < run) break;
  }
  return done;
}

namespace {

uint32_t DatagramBytes(const OutDatagram& d) {
  uint32_t bytes = 0;
  for (int i = 0; i < d.nparts; ++i) bytes += uint32_t(d.parts[i].iov_len);
  return bytes;
}

bool SameDestination(const OutDatagram& a, const OutDatagram& b) {
  return SameAddress(a.to.addr, b.to.addr) && a.to.port == b.to.port;
}

}  // namespace

int UdpPort::SendBatch(int fd, bool ipv4, const OutDatagram* datagrams, int n) {
  mmsghdr messages[kSendBatch];
  sockaddr_storage destinations[kSendBatch];
  // One more iovec per datagram: an IPv4 GSO segment's ICRC, fixed for its ID.
  iovec iovs[kSendBatch * (OutDatagram::kMaxParts + 1)];
  uint8_t fixed_icrcs[kSendBatch][kIcrcSize];
  alignas(cmsghdr) char control[kSendBatch][CMSG_SPACE(sizeof(uint16_t))];
  int datagrams_in[kSendBatch];  // datagrams carried by each message
  int nmessages = 0, niov = 0;
  for (int i = 0; i < n;) {
    const OutDatagram& first = datagrams[i];
    if (first.nparts < 0 || first.nparts > OutDatagram::kMaxParts) return i > 0 ? i : -EINVAL;
    int group = 1;
    const uint32_t size = DatagramBytes(first);
    if (size > kIcrcSize) {
      uint32_t total = size;
      while (i + group < n && group < kMaxGsoSegments &&
             SameDestination(first, datagrams[i + group])) {
        const OutDatagram& next_datagram = datagrams[i + group];
        const uint32_t next = DatagramBytes(next_datagram);
        if (next > size || total + next > kMaxGsoBytes) break;
        // IPv4: the ICRC to fix must be whole in the last part.
        if (ipv4 && (next_datagram.nparts < 1 || next_datagram.nparts > OutDatagram::kMaxParts ||
                     next_datagram.parts[next_datagram.nparts - 1].iov_len < kIcrcSize))
          break;
        total += next;
        ++group;
        if (next < size) break;  // only the last segment may be shorter
      }
    }
    mmsghdr& m = messages[nmessages];
    memset(&m, 0, sizeof m);
    m.msg_hdr.msg_name = &destinations[nmessages];
    m.msg_hdr.msg_namelen = ToSockaddr(first.to.addr, first.to.port ? first.to.port : kRoceUdpPort,
                                       &destinations[nmessages]);
    m.msg_hdr.msg_iov = &iovs[niov];
    for (int g = 0; g < group; ++g) {
      const OutDatagram& d = datagrams[i + g];
      for (int p = 0; p < d.nparts; ++p) iovs[niov++] = d.parts[p];
      if (ipv4 && g > 0) {
        // The kernel gives segment g the IPv4 ID g: its ICRC, computed for
        // ID 0, changes by the delta of ID g (icrc.h). The caller's bytes
        // stay as they were.
        iovec& last = iovs[niov - 1];
        last.iov_len -= kIcrcSize;
        const uint8_t* icrc = static_cast<const uint8_t*>(last.iov_base) + last.iov_len;
        const uint32_t value = LoadIcrc(std::span<const uint8_t, kIcrcSize>(icrc, kIcrcSize)) ^
                               Ipv4IdIcrcDelta(uint16_t(g), DatagramBytes(d) - kIcrcSize);
        StoreIcrc(value, std::span<uint8_t, kIcrcSize>(fixed_icrcs[i + g], kIcrcSize));
        iovs[niov++] = {fixed_icrcs[i + g], kIcrcSize};
      }
    }
    m.msg_hdr.msg_iovlen = size_t(&iovs[niov] - static_cast<iovec*>(m.msg_hdr.msg_iov));
    if (group > 1) {
      m.msg_hdr.msg_control = control[nmessages];
      m.msg_hdr.msg_controllen = sizeof control[nmessages];
      cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t segment = uint16_t(size);
      memcpy(CMSG_DATA(c), &segment, sizeof segment);
      counters_.gso_batches.fetch_add(1, std::memory_order_relaxed);
    }
    datagrams_in[nmessages++] = group;
    i += group;
  }
  const int sent = sendmmsg(fd, messages, unsigned(nmessages), MSG_DONTWAIT);
  counters_.send_calls.fetch_add(1, std::memory_order_relaxed);
  if (sent < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return 0;
    return -errno;
  }
  int count = 0;
  for (int m = 0; m < sent; ++m) count += datagrams_in[m];
  counters_.sent.fetch_add(uint64_t(count), std::memory_order_relaxed);
  return count;
}

int UdpPort::ReadSocket(const Socket& s, const DatagramSink& sink, int max) {
  mmsghdr messages[kReadBatch];
  iovec iovs[kReadBatch];
  sockaddr_storage sources[kReadBatch];
  constexpr size_t kControlBytes = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
  alignas(cmsghdr) char control[kReadBatch][kControlBytes];
  const int want = std::min(max, kReadBatch);
  for (int i = 0; i < want; ++i) {
    iovs[i] = {receive_buffers_.get() + size_t(i) * kReadBufferBytes, kReadBufferBytes};
    memset(&messages[i], 0, sizeof messages[i]);
    messages[i].msg_hdr.msg_name = &sources[i];
    messages[i].msg_hdr.msg_namelen = sizeof sources[i];
    messages[i].msg_hdr.msg_iov = &iovs[i];
    messages[i].msg_hdr.msg_iovlen = 1;
    messages[i].msg_hdr.msg_control = control[i];
    messages[i].msg_hdr.msg_controllen = kControlBytes;
  }
  const int got = recvmmsg(s.fd, messages, unsigned(want), MSG_DONTWAIT, nullptr);
  if (got <= 0) return 0;
  counters_.receive_calls.fetch_add(1, std::memory_order_relaxed);
  int delivered = 0;
  for (int i = 0; i < got; ++i) {
    const msghdr& h = messages[i].msg_hdr;
    if (h.msg_flags & MSG_TRUNC) continue;  // longer than 64 KiB: no RoCE packet is
    InDatagram d;
    d.from = FromSockaddr(sources[i]);
    d.local = s.address;
    uint32_t segment = messages[i].msg_len;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo info;
        memcpy(&info, CMSG_DATA(c), sizeof info);
        d.local = MappedIpv4(info.ipi_addr);
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo info;
        memcpy(&info, CMSG_DATA(c), sizeof info);
        d.local = info.ipi6_addr;
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int size;
        memcpy(&size, CMSG_DATA(c), sizeof size);
        if (size > 0) segment = uint32_t(size);
      }
    }
    const uint8_t* data = static_cast<const uint8_t*>(iovs[i].iov_base);
    const uint32_t length = messages[i].msg_len;
    if (segment < length) counters_.gro_batches.fetch_add(1, std::memory_order_relaxed);
    d.gro_segment = 0;
    for (uint32_t offset = 0; offset < length || length == 0; offset += segment) {
      d.data = data + offset;
      d.len = std::min(segment, length - offset);
      sink(d);
      ++d.gro_segment;
      ++delivered;
      if (length == 0 || segment == 0) break;
    }
  }
  counters_.received.fetch_add(uint64_t(delivered), std::memory_order_relaxed);
  return delivered;
}

void UdpPort::TryBindLater() {
  const uint64_t now = NowNs();
  if (now < next_late_bind_ns_) return;
  next_late_bind_ns_ = now + kLateBindIntervalNs;
  for (size_t i = 0; i < send_only_sockets_.size(); ++i) {
    if (late_bound_[i]) continue;
    const Socket& s = send_only_sockets_[i];
    const int fd = OpenRoceSocket(s.address, port_);
    if (fd < 0) continue;  // still held by the other user's group
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kLateSocketBase + late_sockets_.size();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
      close(fd);
      continue;
    }
    late_sockets_.push_back({fd, s.address, s.ipv4, port_});
    late_bound_[i] = true;
    counters_.late_binds.fetch_add(1, std::memory_order_relaxed);
  }
}

int UdpPort::Poll(const DatagramSink& sink, int max) {
  if (max <= 0) return 0;
  // Where another user's group held the port: take it once it is free, so
  // that the address is not left without a receiver when they have gone.
  if (late_sockets_.size() < send_only_sockets_.size()) TryBindLater();
  if (sockets_.empty() && late_sockets_.empty()) return 0;  // the other user's group hands ours on
  if (sockets_.size() == 1 && late_sockets_.empty()) return ReadSocket(sockets_[0], sink, max);
  // Several addresses: one epoll_wait finds the sockets with datagrams, so an
  // empty poll costs one system call whatever the number of addresses.
  epoll_event ready[16];
  const int nready = epoll_wait(epoll_fd_, ready, 16, 0);
  int total = 0;
  for (int i = 0; i < nready && total < max; ++i) {
    const size_t index = size_t((ready[(size_t(i) + next_socket_) % size_t(nready)].data.u64));
    if (index < sockets_.size())
      total += ReadSocket(sockets_[index], sink, max - total);
    else if (index >= kLateSocketBase && index - kLateSocketBase < late_sockets_.size())
      total += ReadSocket(late_sockets_[index - kLateSocketBase], sink, max - total);
  }
  ++next_socket_;
  return total;
}

}  // namespace softrdma::roce
