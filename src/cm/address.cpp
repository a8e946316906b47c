#include "cm/address.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softrdma::cm {

socklen_t SockaddrLen(const sockaddr* addr) {
  if (addr == nullptr) return 0;
  if (addr->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (addr->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

uint16_t PortOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  if (addr->sa_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  }
  return 0;
}

void SetPort(sockaddr* addr, uint16_t port) {
  if (addr->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(port);
  if (addr->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(port);
}

bool IsAnyAddress(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (addr->sa_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  }
  return true;
}

bool IsLoopbackAddress(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr);
  }
  return false;
}

Gid GidOfAddress(const sockaddr* addr) {
  Gid gid{};
  if (addr->sa_family == AF_INET) {
    gid[10] = 0xff;
    gid[11] = 0xff;
    std::memcpy(&gid[12], &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    std::memcpy(gid.data(), &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
  }
  return gid;
}

Gid RoceGidOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET6 &&
      IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr)) {
    sockaddr_in loopback{};
    loopback.sin_family = AF_INET;
    loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return GidOfAddress(reinterpret_cast<sockaddr*>(&loopback));
  }
  return GidOfAddress(addr);
}

bool SameIp(const sockaddr* a, const sockaddr* b) {
  return GidOfAddress(a) == GidOfAddress(b);
}

void AddressOfGid(const Gid& gid, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  static const uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid.data(), kMappedPrefix, 12) == 0) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    std::memcpy(&sin->sin_addr, &gid[12], 4);
    sin->sin_port = htons(port);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
    sin6->sin6_family = AF_INET6;
    std::memcpy(&sin6->sin6_addr, gid.data(), 16);
    sin6->sin6_port = htons(port);
  }
}

std::array<uint8_t, 16> CmaIpOf(const sockaddr* addr) {
  std::array<uint8_t, 16> ip{};
  if (addr->sa_family == AF_INET) {
    std::memcpy(&ip[12], &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    std::memcpy(ip.data(), &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
  }
  return ip;
}

void AddressOfCmaIp(uint8_t ip_version, const std::array<uint8_t, 16>& ip, uint16_t port,
                    sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (ip_version == 4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    std::memcpy(&sin->sin_addr, &ip[12], 4);
    sin->sin_port = htons(port);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
    sin6->sin6_family = AF_INET6;
    std::memcpy(&sin6->sin6_addr, ip.data(), 16);
    sin6->sin6_port = htons(port);
  }
}

Status RouteSource(const sockaddr* dst, sockaddr_storage* src) {
  socklen_t len = SockaddrLen(dst);
  if (len == 0) return Status::Error(EAFNOSUPPORT, "address family");
  int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error(errno, "socket");
  sockaddr_storage probe;
  std::memcpy(&probe, dst, len);
  // connect() on a UDP socket only consults the routing table; the port
  // must be non-zero for it to pick a route.
  SetPort(reinterpret_cast<sockaddr*>(&probe), 4791);
  if (connect(fd, reinterpret_cast<sockaddr*>(&probe), len) != 0) {
    int err = errno;
    close(fd);
    return Status::Error(err, "no route");
  }
  socklen_t src_len = sizeof(*src);
  int rc = getsockname(fd, reinterpret_cast<sockaddr*>(src), &src_len);
  int err = errno;
  close(fd);
  if (rc != 0) return Status::Error(err, "getsockname");
  SetPort(reinterpret_cast<sockaddr*>(src), 0);
  return Status::Ok();
}

bool IsLocalAddress(const sockaddr* addr) {
  socklen_t len = SockaddrLen(addr);
  if (len == 0) return false;
  int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_storage probe;
  std::memcpy(&probe, addr, len);
  SetPort(reinterpret_cast<sockaddr*>(&probe), 0);
  bool local = bind(fd, reinterpret_cast<sockaddr*>(&probe), len) == 0;
  close(fd);
  return local;
}

int FindGidIndex(ibv_context* context, const Gid& gid) {
  ibv_port_attr port_attr;
  if (ibv_query_port(context, 1, &port_attr) != 0) return -1;
  for (int i = 0; i < port_attr.gid_tbl_len; ++i) {
    ibv_gid entry;
    if (ibv_query_gid(context, 1, i, &entry) != 0) continue;
    if (std::memcmp(entry.raw, gid.data(), 16) == 0) return i;
  }
  return -1;
}

}  // namespace softrdma::cm
