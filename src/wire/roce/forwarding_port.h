// Demultiplexing to the owning process (design.md, "RoCEv2 wire: the UDP
// port..."): every RoCE process of a user binds UDP 4791 on its addresses
// with SO_REUSEPORT, so the kernel may hand a datagram to any of them. This
// decorator passes on the datagrams whose BTH DestQP is ours (or unknown, or
// QP1: the CM's router takes those), and forwards the others to the process
// that owns the QPN, over an abstract Unix datagram socket per process named
// <prefix><owner id>; what other processes forward to us comes out of Poll
// like any datagram. ReadableFd covers both the inner port and that socket.
// The datagrams one Poll forwards to one process travel in one Unix
// datagram (a Unix socket queues only net.unix.max_dgram_qlen, 10 by
// default, of them).
//
// The receiving socket has SO_PASSCRED: a forwarded datagram whose sender is
// not of our uid is dropped (abstract sockets are open to every user of the
// network namespace).
//
// Registries (users, namespaces) number their QPs in ranges of their own
// (host/qpn_range.h), and another user's processes may hold UDP 4791 on an
// address of ours (a reuseport group admits one uid). With a Gateway, a
// datagram for a QPN of another range goes to that range's gateway, an
// abstract socket <gateway prefix><slot> held by one live process of the
// registry owning the range (the first to bind it; the others try again
// every 100 ms, so another takes over when it exits). The gateway takes
// datagrams from any uid (exactly as trusted as datagrams from the network:
// the ICRC, PSN and rkey checks protect the QPs) for QPNs of its own range
// only, and hands each to its owner like a datagram from the UDP port.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"
#include "wire/roce/packet_port.h"

namespace softrdma::roce {

class ForwardingPort : public PacketPort {
 public:
  // For a QPN, the id (a pid) of the other live process of ours that owns
  // it, or 0: ours, unknown, or no longer alive. Called from Poll only.
  using ForeignOwner = std::function<uint32_t(uint32_t qpn)>;

  // The registry gateways: the names' prefix and the slot of our range.
  struct Gateway {
    std::string prefix;
    uint32_t own_slot = 0;
    // The slot of a QPN's range; QPNs for which it answers own_slot are ours.
    std::function<uint32_t(uint32_t qpn)> slot_of;
  };

  // Binds <prefix><self_id> (abstract). EADDRINUSE: another port holds it.
  // Without `gateway` every QPN is taken as of our range.
  static Status Open(std::unique_ptr<PacketPort> inner, const std::string& prefix, uint32_t self_id,
                     ForeignOwner foreign_owner, std::unique_ptr<ForwardingPort>* out,
                     const Gateway* gateway = nullptr);
  ~ForwardingPort() override;
  ForwardingPort(const ForwardingPort&) = delete;
  ForwardingPort& operator=(const ForwardingPort&) = delete;

  int Send(const OutDatagram* datagrams, int n) override { return inner_->Send(datagrams, n); }
  int Poll(const DatagramSink& sink, int max) override;
  int ReadableFd() const override { return epoll_fd_; }
  bool AddressIsOurs(const in6_addr& address) const override {
    return inner_->AddressIsOurs(address);
  }
  void FlushHeld() override { inner_->FlushHeld(); }
  uint16_t SourcePort(const in6_addr& from) const override { return inner_->SourcePort(from); }
  PacketPort* inner() const { return inner_.get(); }

  struct Counters {
    uint64_t forwarded = 0;       // sent on to their owner
    uint64_t forward_failed = 0;  // owner gone or its socket full: dropped (the sender retransmits)
    uint64_t received_forwarded = 0;  // handed to us by another process
    uint64_t refused = 0;             // from a process of another uid, or not a forwarded datagram
    uint64_t to_gateway = 0;          // sent on to another range's gateway
    uint64_t to_gateway_failed = 0;   // no gateway there, or it is full: dropped
    uint64_t via_gateway = 0;         // received through our gateway
    uint64_t gateway_refused = 0;     // at our gateway: not a datagram for our range
    uint64_t batches_sent = 0;        // Unix datagrams sent (each carries one or more)
    uint64_t batches_failed = 0;      // Unix datagrams the destination did not take
  };
  // Whether this port holds its registry's gateway now.
  bool holds_gateway() const { return gateway_fd_ >= 0; }
  Counters counters() const { return counters_; }  // from the polling thread

 private:
  ForwardingPort() = default;
  // The datagrams of one poll for one destination, sent as one Unix
  // datagram when the poll ends (or the batch is full).
  struct Batch {
    std::string name;  // abstract socket name
    bool gateway = false;
    uint32_t count = 0;  // 0: free
    std::vector<uint8_t> bytes;
  };
  void Queue(const std::string& name, bool gateway, const InDatagram& d);
  void Flush(Batch& batch);
  void FlushAll();
  void Forward(uint32_t owner, const InDatagram& d);
  // Reads what other processes forwarded to `fd`: from our uid only, or
  // (the gateway) from any uid, for our range only.
  int ReadForwarded(int fd, bool gateway, const DatagramSink& sink, int max);
  // Takes the gateway if it is free (at most every 100 ms).
  void TryHoldGateway();
  // Where a datagram for `qpn` goes: to its owner, another range's gateway,
  // or (false) here.
  bool RouteAway(uint32_t qpn, const InDatagram& d);

  std::unique_ptr<PacketPort> inner_;
  std::string prefix_;
  ForeignOwner foreign_owner_;
  int socket_fd_ = -1;
  int epoll_fd_ = -1;
  bool has_gateway_ = false;
  Gateway gateway_;
  int gateway_fd_ = -1;
  int unix_epoll_fd_ = -1;  // our socket and the gateway: which to read
  std::vector<Batch> pending_;
  uint64_t next_gateway_try_ns_ = 0;
  uid_t uid_ = 0;
  std::unique_ptr<uint8_t[]> read_buffers_;  // Poll's (one thread at a time)
  Counters counters_;
};

}  // namespace softrdma::roce
