// The MAD transport of the shm wire: CM messages between processes of one
// host travel as 256-byte datagrams between abstract Unix sockets, one per
// bound rdma_cm port.
//
// Why sockets and not the data rings: a CM port must be found by (port space,
// port) by any process of the host, must be exclusive (EADDRINUSE), must vanish
// when its process dies, and must wake a sleeping CM thread. An abstract
// socket name gives all four with no shared table to repair after a crash:
// the kernel owns the name and frees it with the socket. SCM_CREDENTIALS tells
// the receiver the sender's pid, which the CM uses to notice a peer's death.
// The bytes are standard CM MADs (mad_codec.h), so the RoCE wire can carry
// the same messages to QP1 of another host.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "util/status.h"

namespace softrdma::cm {

// "softrdma-[<namespace>-]cm-<port space hex>-<port>" (no leading NUL; the
// socket layer adds it). Per SOFTRDMA_NAMESPACE, one for every user of the
// host (util/gsi_route.h says why). The same names the GSI forwarder finds.
std::string PortSocketName(uint16_t port_space, uint16_t port);

class MadPort {
 public:
  MadPort() = default;
  ~MadPort();
  MadPort(const MadPort&) = delete;
  MadPort& operator=(const MadPort&) = delete;

  // Binds the port's name. EADDRINUSE when another socket of the host holds it.
  Status Open(uint16_t port_space, uint16_t port);
  void Close();

  int fd() const { return fd_; }
  uint16_t port() const { return port_; }
  const std::string& name() const { return name_; }

  // Sends one datagram to the socket named `to`. ECONNREFUSED/ENOENT when
  // nothing is bound there; EAGAIN when the receiver's queue is full (the
  // CM's retransmission covers it, as for a lost packet).
  Status SendTo(const std::string& to, std::span<const uint8_t> bytes);

  // Reads one datagram without blocking. Returns its length (0 with EAGAIN
  // status when none), the sender's name, pid and uid (from the kernel).
  Status Receive(std::span<uint8_t> buf, size_t* len, std::string* from, pid_t* from_pid,
                 uid_t* from_uid);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string name_;
};

}  // namespace softrdma::cm
