// Fault injection below the RoCE transport: a PacketPort decorator that
// drops, duplicates, reorders and delays datagrams with given probabilities,
// separately for what is sent and what is received. This kernel has no netem;
// this is how loss recovery is tested beyond what nftables can do (nftables
// drops and duplicates only, and is the outside check).
//
// Each datagram draws once per direction, in this order: drop; else delay
// (held for delay_us, then passed on: datagrams behind it overtake it); else
// reorder (held until the next datagram of that direction has passed, or
// delay_us at most); and, if passed on now, duplicate (passed on twice).
// The draws come from a generator seeded with `seed`, one per direction, so
// a run with the same traffic makes the same choices.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "util/status.h"
#include "wire/roce/packet_port.h"

namespace softrdma::roce {

struct FaultRates {
  double drop = 0, duplicate = 0, reorder = 0, delay = 0;  // probabilities, 0..1
  bool any() const { return drop > 0 || duplicate > 0 || reorder > 0 || delay > 0; }
};

struct FaultOptions {
  FaultRates send, receive;
  uint32_t delay_us = 1000;
  uint64_t seed = 1;
  // Never drop an RC ACKNOWLEDGE (opcode 0x11, ACKs and NAKs): for tests with
  // programs that destroy their QP as soon as their last message completed,
  // whose peer then cannot recover a lost last ACK (as on any network).
  bool spare_acks = false;
  bool any() const { return send.any() || receive.any(); }
};

// Reads SOFTRDMA_ROCE_FAULT_{SEND,RECV}_{DROP,DUP,REORDER,DELAY} (a
// probability: "0.05" or "5%"), SOFTRDMA_ROCE_FAULT_DELAY_US,
// SOFTRDMA_ROCE_FAULT_SEED and SOFTRDMA_ROCE_FAULT_SPARE_ACKS (0 or 1)
// (docs/configuration.md). EINVAL names the variable
// whose value is not a number in range.
Status FaultOptionsFromEnv(FaultOptions* out);

struct FaultCounters {
  uint64_t passed = 0, dropped = 0, duplicated = 0, reordered = 0, delayed = 0;
  uint64_t overflowed = 0;  // held datagrams beyond the backlog bound: dropped
};

class FaultInjectingPort : public PacketPort {
 public:
  FaultInjectingPort(std::unique_ptr<PacketPort> inner, const FaultOptions& options);
  // Always accepts every datagram (those the inner port refuses for now are
  // kept and offered again at the next Send or Poll); a negative errno only
  // when the inner port reports one for the first datagram.
  int Send(const OutDatagram* datagrams, int n) override;
  int Poll(const DatagramSink& sink, int max) override;

  // The inner port's: a datagram held here makes no fd readable, see holding().
  int ReadableFd() const override { return inner_->ReadableFd(); }
  bool AddressIsOurs(const in6_addr& address) const override {
    return inner_->AddressIsOurs(address);
  }
  uint16_t SourcePort(const in6_addr& from) const override { return inner_->SourcePort(from); }
  // Every held datagram of the send side goes now, delayed and reordered
  // ones in their order; the receive side's are for a process that exits.
  void FlushHeld() override;

  FaultCounters send_counters() const;
  // These two read the receive side: from the thread that polls (or while
  // none does).
  FaultCounters receive_counters() const { return receive_counters_; }
  PacketPort* inner() const { return inner_.get(); }
  // True while datagrams wait for their time (delayed, reordered or refused
  // by the inner port): whoever drives the port must Poll again later even
  // when nothing arrives.
  bool holding() const;

 private:
  using Clock = std::chrono::steady_clock;
  // A datagram copied out of its sender's memory, for later.
  struct Held {
    Clock::time_point due;
    IpEndpoint peer;  // destination (send) or source (receive)
    in6_addr local{};
    uint16_t src_port = 0;
    std::vector<uint8_t> bytes;
  };
  enum class Fate { kPass, kDrop, kDelay, kReorder };
  // `may_drop` false: an ACK spared from drops (the draws are made anyway,
  // so sparing ACKs does not shift the other choices).
  static Fate Draw(const FaultRates& rates, std::mt19937_64& rng, FaultCounters& counters,
                   bool may_drop, bool* duplicate);
  bool Spared(const uint8_t* first_byte, size_t length) const {
    return options_.spare_acks && length > 0 && *first_byte == 0x11;
  }
  static Held CopyOut(const OutDatagram& d, Clock::time_point due);
  static OutDatagram View(const Held& h);
  void Hold(std::deque<Held>& queue, Held held, FaultCounters& counters);
  // Sends what is due among the held datagrams and the backlog. Called with
  // send_mutex_ held.
  void FlushSend(Clock::time_point now);
  int DeliverDueReceived(const DatagramSink& sink, Clock::time_point now);

  std::unique_ptr<PacketPort> inner_;
  FaultOptions options_;
  std::mt19937_64 send_rng_, receive_rng_;
  std::deque<Held> send_delayed_, send_reordered_, send_backlog_;
  std::deque<Held> receive_delayed_, receive_reordered_;
  FaultCounters send_counters_, receive_counters_;
  // Send may run on several threads, and from inside Poll's sink: the send
  // side has its own mutex, never held while the sink runs. The receive side
  // belongs to the thread that polls (one at a time, packet_port.h).
  mutable std::mutex send_mutex_;
};

// Wraps `port` in a FaultInjectingPort when the environment asks for faults;
// returns it unchanged otherwise. A bad variable is an error (never ignored).
Status WrapWithFaultsFromEnv(std::unique_ptr<PacketPort>* port);

}  // namespace softrdma::roce
