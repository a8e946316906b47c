#include "cm/mad_port.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/gsi_route.h"

namespace softrdma::cm {
namespace {

// Builds an abstract address (sun_path[0] = 0) for `name`.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t len = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), len);
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + len);
}

}  // namespace

std::string PortSocketName(uint16_t port_space, uint16_t port) {
  return CmSocketName(port_space, port);
}

MadPort::~MadPort() {
  Close();
}

Status MadPort::Open(uint16_t port_space, uint16_t port) {
  Close();
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error(errno, "socket(AF_UNIX)");
  std::string name = PortSocketName(port_space, port);
  sockaddr_un addr;
  socklen_t addr_len = AbstractAddress(name, &addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
    int err = errno;
    close(fd);
    return Status::Error(err, "bind " + name);
  }
  int one = 1;
  // The receiver learns each sender's pid from the kernel, not from the
  // message, so a peer cannot claim another process's identity.
  setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
  fd_ = fd;
  port_ = port;
  name_ = std::move(name);
  return Status::Ok();
}

void MadPort::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  port_ = 0;
  name_.clear();
}

Status MadPort::SendTo(const std::string& to, std::span<const uint8_t> bytes) {
  sockaddr_un addr;
  socklen_t addr_len = AbstractAddress(to, &addr);
  ssize_t n = sendto(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL,
                     reinterpret_cast<sockaddr*>(&addr), addr_len);
  if (n < 0) return Status::Error(errno, "sendto " + to);
  return Status::Ok();
}

Status MadPort::Receive(std::span<uint8_t> buf, size_t* len, std::string* from, pid_t* from_pid,
                        uid_t* from_uid) {
  sockaddr_un addr;
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  msghdr msg{};
  msg.msg_name = &addr;
  msg.msg_namelen = sizeof(addr);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0) return Status::Error(errno, "recvmsg");
  *len = size_t(n);
  *from_pid = 0;
  *from_uid = uid_t(-1);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      ucred cred;
      std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      *from_pid = cred.pid;
      *from_uid = cred.uid;
    }
  }
  from->clear();
  size_t path_off = offsetof(sockaddr_un, sun_path);
  if (msg.msg_namelen > path_off + 1 && addr.sun_path[0] == '\0') {
    from->assign(addr.sun_path + 1, msg.msg_namelen - path_off - 1);
  }
  return Status::Ok();
}

}  // namespace softrdma::cm
