// Demultiplexing to the owning process (design.md, "RoCEv2 wire: the UDP
// port..."): every RoCE process of a user binds UDP 4791 on its addresses
// with SO_REUSEPORT, so the kernel may hand a datagram to any of them. This
// decorator passes on the datagrams whose BTH DestQP is ours (or unknown, or
// QP1: the CM's router takes those), and forwards the others to the process
// that owns the QPN, over an abstract Unix datagram socket per process named
// <prefix><owner id>; what other processes forward to us comes out of Poll
// like any datagram. ReadableFd covers both the inner port and that socket.
//
// The receiving socket has SO_PASSCRED: a forwarded datagram whose sender is
// not of our uid is dropped (abstract sockets are open to every user of the
// network namespace).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/status.h"
#include "wire/roce/packet_port.h"

namespace softrdma::roce {

class ForwardingPort : public PacketPort {
 public:
  // For a QPN, the id (a pid) of the other live process of ours that owns
  // it, or 0: ours, unknown, or no longer alive. Called from Poll only.
  using ForeignOwner = std::function<uint32_t(uint32_t qpn)>;

  // Binds <prefix><self_id> (abstract). EADDRINUSE: another port holds it.
  static Status Open(std::unique_ptr<PacketPort> inner, const std::string& prefix, uint32_t self_id,
                     ForeignOwner foreign_owner, std::unique_ptr<ForwardingPort>* out);
  ~ForwardingPort() override;
  ForwardingPort(const ForwardingPort&) = delete;
  ForwardingPort& operator=(const ForwardingPort&) = delete;

  int Send(const OutDatagram* datagrams, int n) override { return inner_->Send(datagrams, n); }
  int Poll(const DatagramSink& sink, int max) override;
  int ReadableFd() const override { return epoll_fd_; }
  bool AddressIsOurs(const in6_addr& address) const override {
    return inner_->AddressIsOurs(address);
  }
  PacketPort* inner() const { return inner_.get(); }

  struct Counters {
    uint64_t forwarded = 0;       // sent on to their owner
    uint64_t forward_failed = 0;  // owner gone or its socket full: dropped (the sender retransmits)
    uint64_t received_forwarded = 0;  // handed to us by another process
    uint64_t refused = 0;             // from a process of another uid, or not a forwarded datagram
  };
  Counters counters() const { return counters_; }  // from the polling thread

 private:
  ForwardingPort() = default;
  void Forward(uint32_t owner, const InDatagram& d);
  int ReadForwarded(const DatagramSink& sink, int max);

  std::unique_ptr<PacketPort> inner_;
  std::string prefix_;
  ForeignOwner foreign_owner_;
  int socket_fd_ = -1;
  int epoll_fd_ = -1;
  uid_t uid_ = 0;
  std::unique_ptr<uint8_t[]> read_buffers_;  // Poll's (one thread at a time)
  Counters counters_;
};

}  // namespace softrdma::roce
