// IP addresses as rdma_cm handles them on RoCEv2: the source address chosen
// by the routing table, GIDs built from addresses (IPv4-mapped for IPv4), and
// the conversions between sockaddrs, GIDs and the CM's 16-byte IP fields.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>

#include "cm/mad_codec.h"
#include "util/status.h"

namespace softrdma::cm {

socklen_t SockaddrLen(const sockaddr* addr);  // 0 for an unsupported family
uint16_t PortOf(const sockaddr* addr);        // host order
void SetPort(sockaddr* addr, uint16_t port);  // host order
bool IsAnyAddress(const sockaddr* addr);
bool IsLoopbackAddress(const sockaddr* addr);  // 127.0.0.0/8, ::1
bool SameIp(const sockaddr* a, const sockaddr* b);

// ::ffff:a.b.c.d for IPv4, the address itself for IPv6.
Gid GidOfAddress(const sockaddr* addr);
// The RoCE GID that carries traffic for `addr`: GidOfAddress, except that
// IPv6 loopback (::1), which has no GID (the loopback device is no RoCE
// netdev), travels on the IPv4 loopback GID, as the kernel's rdma_cm binds
// loopback connections to a device of its choice.
Gid RoceGidOf(const sockaddr* addr);
// The inverse of GidOfAddress: an IPv4-mapped GID gives AF_INET, anything else AF_INET6.
void AddressOfGid(const Gid& gid, uint16_t port, sockaddr_storage* out);

// The CM IP header's 16-byte form (IPv4 in the last four bytes, rest zero).
std::array<uint8_t, 16> CmaIpOf(const sockaddr* addr);
void AddressOfCmaIp(uint8_t ip_version, const std::array<uint8_t, 16>& ip, uint16_t port,
                    sockaddr_storage* out);

// The source address the host's routing table picks for `dst` (a connected
// UDP socket's local address). ENETUNREACH/EHOSTUNREACH when there is no route.
Status RouteSource(const sockaddr* dst, sockaddr_storage* src);

// Whether `addr` is one of this host's addresses (a bind succeeds on it).
bool IsLocalAddress(const sockaddr* addr);

// The GID table index of `gid` on port 1 of `context`, or -1.
int FindGidIndex(ibv_context* context, const Gid& gid);

}  // namespace softrdma::cm
