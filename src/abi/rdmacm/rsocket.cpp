// The rsocket API of librdmacm.so.1 (rdma/rsocket.h): sockets over RDMA
// connections. softrdma exports all 27 calls, because clients are linked
// BIND_NOW and a missing symbol stops them at load time, but does not
// implement them yet: rsockets are a whole protocol of their own (a private
// credit/flow-control scheme over RC QPs, an iomap window protocol and a
// fork-aware fd table) built on top of the connection manager, and they come
// after rdma_* connection management works. Until then every call fails the
// way the socket call it mirrors fails, with ENOSYS as the reason:
//   - int and ssize_t results: -1, errno = ENOSYS;
//   - riomap: (off_t)-1, errno = ENOSYS;
//   - riowrite (declared size_t by rsocket.h): (size_t)-1, errno = ENOSYS.
// No call reads or writes its arguments. librspreload.so (the LD_PRELOAD
// shim mapping socket calls onto these) is not shipped. docs/abi.md lists
// the status of each symbol; the version script (librdmacm.map) decides the
// exports.
#include <rdma/rsocket.h>

#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>

#include "abi/verbs/symver.h"

namespace {

template <typename T>
T fail_enosys() noexcept {
  errno = ENOSYS;
  return static_cast<T>(-1);
}

}  // namespace

extern "C" {

// Socket lifetime and connection set-up.

SOFTRDMA_EXPORT int rsocket(int /*domain*/, int /*type*/, int /*protocol*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rbind(int /*socket*/, const struct sockaddr* /*addr*/, socklen_t /*addrlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rlisten(int /*socket*/, int /*backlog*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int raccept(int /*socket*/, struct sockaddr* /*addr*/, socklen_t* /*addrlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rconnect(int /*socket*/, const struct sockaddr* /*addr*/,
                             socklen_t /*addrlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rshutdown(int /*socket*/, int /*how*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rclose(int /*socket*/) {
  return fail_enosys<int>();
}

// Data transfer.

SOFTRDMA_EXPORT ssize_t rrecv(int /*socket*/, void* /*buf*/, size_t /*len*/, int /*flags*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rrecvfrom(int /*socket*/, void* /*buf*/, size_t /*len*/, int /*flags*/,
                                  struct sockaddr* /*src_addr*/, socklen_t* /*addrlen*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rrecvmsg(int /*socket*/, struct msghdr* /*msg*/, int /*flags*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rsend(int /*socket*/, const void* /*buf*/, size_t /*len*/, int /*flags*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rsendto(int /*socket*/, const void* /*buf*/, size_t /*len*/, int /*flags*/,
                                const struct sockaddr* /*dest_addr*/, socklen_t /*addrlen*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rsendmsg(int /*socket*/, const struct msghdr* /*msg*/, int /*flags*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rread(int /*socket*/, void* /*buf*/, size_t /*count*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rreadv(int /*socket*/, const struct iovec* /*iov*/, int /*iovcnt*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rwrite(int /*socket*/, const void* /*buf*/, size_t /*count*/) {
  return fail_enosys<ssize_t>();
}

SOFTRDMA_EXPORT ssize_t rwritev(int /*socket*/, const struct iovec* /*iov*/, int /*iovcnt*/) {
  return fail_enosys<ssize_t>();
}

// Readiness.

SOFTRDMA_EXPORT int rpoll(struct pollfd* /*fds*/, nfds_t /*nfds*/, int /*timeout*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rselect(int /*nfds*/, fd_set* /*readfds*/, fd_set* /*writefds*/,
                            fd_set* /*exceptfds*/, struct timeval* /*timeout*/) {
  return fail_enosys<int>();
}

// Addresses, options and descriptor flags.

SOFTRDMA_EXPORT int rgetpeername(int /*socket*/, struct sockaddr* /*addr*/,
                                 socklen_t* /*addrlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rgetsockname(int /*socket*/, struct sockaddr* /*addr*/,
                                 socklen_t* /*addrlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rsetsockopt(int /*socket*/, int /*level*/, int /*optname*/,
                                const void* /*optval*/, socklen_t /*optlen*/) {
  return fail_enosys<int>();
}

SOFTRDMA_EXPORT int rgetsockopt(int /*socket*/, int /*level*/, int /*optname*/, void* /*optval*/,
                                socklen_t* /*optlen*/) {
  return fail_enosys<int>();
}

// The variadic argument is never fetched (no va_start): it is not touched.
SOFTRDMA_EXPORT int rfcntl(int /*socket*/, int /*cmd*/, ...) {
  return fail_enosys<int>();
}

// Direct placement (iomap windows).

SOFTRDMA_EXPORT off_t riomap(int /*socket*/, void* /*buf*/, size_t /*len*/, int /*prot*/,
                             int /*flags*/, off_t /*offset*/) {
  return fail_enosys<off_t>();
}

SOFTRDMA_EXPORT int riounmap(int /*socket*/, void* /*buf*/, size_t /*len*/) {
  return fail_enosys<int>();
}

// rsocket.h declares riowrite's result size_t (rdma-core returns (size_t)-1
// on error), not ssize_t.
SOFTRDMA_EXPORT size_t riowrite(int /*socket*/, const void* /*buf*/, size_t /*count*/,
                                off_t /*offset*/, int /*flags*/) {
  return fail_enosys<size_t>();
}

}  // extern "C"
