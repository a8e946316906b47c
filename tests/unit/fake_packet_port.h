// An in-process PacketPort for the RoCE transport's tests (eRPC's pattern):
// every datagram sent is delivered to this same process by the next Poll,
// after the faults the test asked for (drop, duplicate, reorder; a seeded
// generator, so a failing run can be repeated), or filtered by a predicate.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <sys/eventfd.h>
#include <unistd.h>

#include "wire/roce/packet_port.h"

namespace softrdma::testing {

// Probabilities per datagram sent, and the generator's seed.
struct PortFaults {
  double drop = 0, duplicate = 0, reorder = 0;
  uint32_t seed = 1;
};

class FakePacketPort : public roce::PacketPort {
 public:
  using Faults = PortFaults;
  // Datagrams for which this returns true are dropped (e.g. "the 3rd packet").
  using DropIf = std::function<bool(const std::vector<uint8_t>& udp_payload, uint64_t index)>;

  // with_fd: ReadableFd() is an eventfd readable while datagrams wait (as
  // the UDP port's), so the engine's fd watcher is exercised.
  explicit FakePacketPort(Faults faults = {}, bool with_fd = false)
      : faults_(faults), random_(faults.seed), fd_(with_fd ? eventfd(0, EFD_NONBLOCK) : -1) {}
  ~FakePacketPort() override {
    if (fd_ >= 0) close(fd_);
  }
  int ReadableFd() const override { return fd_; }

  void SetFaults(Faults f) {
    std::lock_guard<std::mutex> lock(mutex_);
    faults_ = f;
    random_.seed(f.seed);
  }
  void SetDropIf(DropIf f) {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_if_ = std::move(f);
  }
  // Only polls by thread `id` take datagrams; others find the port empty
  // (a test holds what was sent until that thread reads the port).
  void DeliverOnlyTo(std::thread::id id) {
    std::lock_guard<std::mutex> lock(mutex_);
    only_to_ = id;
  }
  // Datagrams sent or injected and not taken by a poll yet.
  size_t Queued() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
  }
  // A datagram as if it came from `from` to `local` (malformed ones too).
  void Inject(const std::vector<uint8_t>& bytes, const in6_addr& from, const in6_addr& local) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Datagram{from, roce::kRoceUdpPort, local, bytes});
    if (fd_ >= 0) {
      const uint64_t one = 1;
      if (write(fd_, &one, sizeof one) < 0) {
      }
    }
  }
  // Under the port's lock: the progress thread sends while a test reads.
  uint64_t sent() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sent_;
  }
  // Datagrams the receiver's sink has returned from (fully handled).
  uint64_t delivered() const { return delivered_.load(std::memory_order_acquire); }
  uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }
  // Calls of Poll (looks at the port, whether or not anything waited).
  uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }

  int Send(const roce::OutDatagram* datagrams, int n) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < n; ++i) {
      const roce::OutDatagram& d = datagrams[i];
      Datagram copy{d.from, d.src_port ? d.src_port : roce::kRoceUdpPort, d.to.addr, {}};
      for (int p = 0; p < d.nparts; ++p) {
        const auto* b = static_cast<const uint8_t*>(d.parts[p].iov_base);
        copy.bytes.insert(copy.bytes.end(), b, b + d.parts[p].iov_len);
      }
      const uint64_t index = sent_++;
      if ((drop_if_ && drop_if_(copy.bytes, index)) || Chance(faults_.drop)) {
        ++dropped_;
        continue;
      }
      const bool twice = Chance(faults_.duplicate);
      queue_.push_back(copy);
      if (twice) queue_.push_back(copy);
      if (queue_.size() >= 2 && Chance(faults_.reorder))
        std::swap(queue_[queue_.size() - 1], queue_[queue_.size() - 2]);
    }
    if (fd_ >= 0 && !queue_.empty()) {
      const uint64_t one = 1;
      if (write(fd_, &one, sizeof one) < 0) {
        // Only on overflow: readable anyway.
      }
    }
    return n;
  }

  int Poll(const roce::DatagramSink& sink, int max) override {
    polls_.fetch_add(1, std::memory_order_relaxed);
    std::deque<Datagram> batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (only_to_ != std::thread::id() && only_to_ != std::this_thread::get_id()) return 0;
      while (!queue_.empty() && static_cast<int>(batch.size()) < max) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      // Under the lock that Send writes it under: readable iff queued.
      if (fd_ >= 0 && queue_.empty()) {
        uint64_t count = 0;
        if (read(fd_, &count, sizeof count) < 0) {
          // EAGAIN: nothing was signalled.
        }
      }
    }
    // Without the lock: the sink sends (ACKs, responses).
    for (const Datagram& d : batch) {
      roce::InDatagram in;
      in.from.addr = d.from;
      in.from.port = d.src_port;
      in.local = d.local;
      in.data = d.bytes.data();
      in.len = static_cast<uint32_t>(d.bytes.size());
      sink(in);
      delivered_.fetch_add(1, std::memory_order_release);
    }
    return static_cast<int>(batch.size());
  }

 private:
  struct Datagram {
    in6_addr from;
    uint16_t src_port;
    in6_addr local;
    std::vector<uint8_t> bytes;
  };
  bool Chance(double p) {
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(random_) < p;
  }

  mutable std::mutex mutex_;
  Faults faults_;
  std::mt19937 random_;
  DropIf drop_if_;
  std::deque<Datagram> queue_;
  uint64_t sent_ = 0, dropped_ = 0;
  std::atomic<uint64_t> polls_{0};
  std::atomic<uint64_t> delivered_{0};
  int fd_ = -1;
  std::thread::id only_to_;  // none: every poll takes
};

}  // namespace softrdma::testing
