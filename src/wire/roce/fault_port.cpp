#include "wire/roce/fault_port.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace softrdma::roce {
namespace {

// Held datagrams beyond this (per queue) are dropped and counted: a peer
// that never polls must not make us grow without bound.
constexpr size_t kMaxHeld = 4096;

Status ReadProbability(const char* name, double* out) {
  const char* text = getenv(name);
  if (!text || !*text) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  double value = strtod(text, &end);
  if (end && *end == '%') {
    value /= 100;
    ++end;
  }
  if (errno != 0 || end == text || *end != '\0' || !(value >= 0.0 && value <= 1.0))
    return Status::Error(EINVAL, std::string(name) + "='" + text +
                                     "': expected a probability from 0 to 1 (or 0% to 100%)");
  *out = value;
  return Status::Ok();
}

Status ReadUnsigned(const char* name, uint64_t max, uint64_t* out) {
  const char* text = getenv(name);
  if (!text || !*text) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > max)
    return Status::Error(EINVAL, std::string(name) + "='" + text +
                                     "': expected a number from 0 to " + std::to_string(max));
  *out = value;
  return Status::Ok();
}

}  // namespace

Status FaultOptionsFromEnv(FaultOptions* out) {
  FaultOptions o;
  struct Rate {
    const char* name;
    double* value;
  };
  const Rate rates[] = {
      {"SOFTRDMA_ROCE_FAULT_SEND_DROP", &o.send.drop},
      {"SOFTRDMA_ROCE_FAULT_SEND_DUP", &o.send.duplicate},
      {"SOFTRDMA_ROCE_FAULT_SEND_REORDER", &o.send.reorder},
      {"SOFTRDMA_ROCE_FAULT_SEND_DELAY", &o.send.delay},
      {"SOFTRDMA_ROCE_FAULT_RECV_DROP", &o.receive.drop},
      {"SOFTRDMA_ROCE_FAULT_RECV_DUP", &o.receive.duplicate},
      {"SOFTRDMA_ROCE_FAULT_RECV_REORDER", &o.receive.reorder},
      {"SOFTRDMA_ROCE_FAULT_RECV_DELAY", &o.receive.delay},
  };
  for (const Rate& rate : rates)
    if (Status s = ReadProbability(rate.name, rate.value); !s.ok()) return s;
  uint64_t delay_us = o.delay_us;
  if (Status s = ReadUnsigned("SOFTRDMA_ROCE_FAULT_DELAY_US", 10'000'000, &delay_us); !s.ok())
    return s;
  o.delay_us = uint32_t(delay_us);
  if (Status s = ReadUnsigned("SOFTRDMA_ROCE_FAULT_SEED", UINT64_MAX, &o.seed); !s.ok()) return s;
  uint64_t spare_acks = 0;
  if (Status s = ReadUnsigned("SOFTRDMA_ROCE_FAULT_SPARE_ACKS", 1, &spare_acks); !s.ok()) return s;
  o.spare_acks = spare_acks != 0;
  *out = o;
  return Status::Ok();
}

Status WrapWithFaultsFromEnv(std::unique_ptr<PacketPort>* port) {
  FaultOptions options;
  if (Status s = FaultOptionsFromEnv(&options); !s.ok()) return s;
  if (options.any()) *port = std::make_unique<FaultInjectingPort>(std::move(*port), options);
  return Status::Ok();
}

FaultInjectingPort::FaultInjectingPort(std::unique_ptr<PacketPort> inner,
                                       const FaultOptions& options)
    : inner_(std::move(inner)),
      options_(options),
      send_rng_(options.seed),
      receive_rng_(options.seed ^ 0x9e3779b97f4a7c15ull) {}

FaultInjectingPort::Fate FaultInjectingPort::Draw(const FaultRates& rates, std::mt19937_64& rng,
                                                  FaultCounters& counters, bool may_drop,
                                                  bool* duplicate) {
  *duplicate = false;
  // One draw per fault, always all four, so one rate does not shift the
  // choices another makes from the same seed.
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double drop = uniform(rng), delay = uniform(rng), reorder = uniform(rng),
               dup = uniform(rng);
  if (may_drop && drop < rates.drop) {
    ++counters.dropped;
    return Fate::kDrop;
  }
  if (delay < rates.delay) return Fate::kDelay;
  if (reorder < rates.reorder) return Fate::kReorder;
  ++counters.passed;
  if (dup < rates.duplicate) {
    ++counters.duplicated;
    *duplicate = true;
  }
  return Fate::kPass;
}

FaultInjectingPort::Held FaultInjectingPort::CopyOut(const OutDatagram& d, Clock::time_point due) {
  Held h;
  h.due = due;
  h.peer = d.to;
  h.local = d.from;
  h.src_port = d.src_port;
  for (int i = 0; i < d.nparts; ++i) {
    const auto* p = static_cast<const uint8_t*>(d.parts[i].iov_base);
    h.bytes.insert(h.bytes.end(), p, p + d.parts[i].iov_len);
  }
  return h;
}

OutDatagram FaultInjectingPort::View(const Held& h) {
  OutDatagram d;
  d.to = h.peer;
  d.from = h.local;
  d.src_port = h.src_port;
  d.parts[0] = {const_cast<uint8_t*>(h.bytes.data()), h.bytes.size()};
  d.nparts = 1;
  return d;
}

void FaultInjectingPort::Hold(std::deque<Held>& queue, Held held, FaultCounters& counters) {
  if (queue.size() >= kMaxHeld) {
    ++counters.overflowed;
    return;
  }
  queue.push_back(std::move(held));
}

void FaultInjectingPort::FlushSend(Clock::time_point now) {
  // Due delayed and overdue reordered datagrams join the backlog (in due
  // order within each queue), which goes out in order.
  for (std::deque<Held>* queue : {&send_delayed_, &send_reordered_}) {
    while (!queue->empty() && queue->front().due <= now) {
      if (queue == &send_delayed_) ++send_counters_.delayed;
      if (queue == &send_reordered_) ++send_counters_.reordered;
      Hold(send_backlog_, std::move(queue->front()), send_counters_);
      queue->pop_front();
    }
  }
  while (!send_backlog_.empty()) {
    OutDatagram views[64];
    const int n = int(std::min<size_t>(64, send_backlog_.size()));
    for (int i = 0; i < n; ++i) views[i] = View(send_backlog_[size_t(i)]);
    const int accepted = inner_->Send(views, n);
    if (accepted < 0) {  // can never go: as a wire would, lose them
      send_counters_.overflowed += uint64_t(n);
      send_backlog_.erase(send_backlog_.begin(), send_backlog_.begin() + n);
      continue;
    }
    send_backlog_.erase(send_backlog_.begin(), send_backlog_.begin() + accepted);
    if (accepted < n) break;
  }
}

void FaultInjectingPort::FlushHeld() {
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    FlushSend(Clock::time_point::max());
  }
  inner_->FlushHeld();
}

FaultCounters FaultInjectingPort::send_counters() const {
  std::lock_guard<std::mutex> lock(send_mutex_);
  return send_counters_;
}

bool FaultInjectingPort::holding() const {
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (!send_delayed_.empty() || !send_reordered_.empty() || !send_backlog_.empty()) return true;
  }
  return !receive_delayed_.empty() || !receive_reordered_.empty();
}

int FaultInjectingPort::Send(const OutDatagram* datagrams, int n) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(send_mutex_);
  FlushSend(now);
  const auto due = now + std::chrono::microseconds(options_.delay_us);
  std::vector<OutDatagram> out;
  std::vector<Held> released;  // reordered datagrams now behind a later one
  out.reserve(size_t(n) * 2 + send_reordered_.size());
  released.reserve(send_reordered_.size() + size_t(n));
  for (int i = 0; i < n; ++i) {
    bool duplicate = false;
    const iovec& head = datagrams[i].parts[0];
    const bool may_drop = !(datagrams[i].nparts > 0 &&
                            Spared(static_cast<const uint8_t*>(head.iov_base), head.iov_len));
    switch (Draw(options_.send, send_rng_, send_counters_, may_drop, &duplicate)) {
      case Fate::kDrop:
        continue;
      case Fate::kDelay:
        Hold(send_delayed_, CopyOut(datagrams[i], due), send_counters_);
        continue;
      case Fate::kReorder:
        Hold(send_reordered_, CopyOut(datagrams[i], due), send_counters_);
        continue;
      case Fate::kPass:
        out.push_back(datagrams[i]);
        if (duplicate) out.push_back(datagrams[i]);
        while (!send_reordered_.empty()) {
          ++send_counters_.reordered;
          released.push_back(std::move(send_reordered_.front()));
          send_reordered_.pop_front();
          out.push_back(View(released.back()));
        }
        break;
    }
  }
  if (out.empty()) return n;
  const int accepted = send_backlog_.empty() ? inner_->Send(out.data(), int(out.size())) : 0;
  if (accepted < 0) return accepted;
  for (size_t j = size_t(accepted); j < out.size(); ++j)
    Hold(send_backlog_, CopyOut(out[j], now), send_counters_);
  return n;
}

int FaultInjectingPort::DeliverDueReceived(const DatagramSink& sink, Clock::time_point now) {
  int delivered = 0;
  for (std::deque<Held>* queue : {&receive_delayed_, &receive_reordered_}) {
    while (!queue->empty() && queue->front().due <= now) {
      if (queue == &receive_delayed_) ++receive_counters_.delayed;
      if (queue == &receive_reordered_) ++receive_counters_.reordered;
      const Held held = std::move(queue->front());
      queue->pop_front();
      InDatagram d;
      d.from = held.peer;
      d.local = held.local;
      d.data = held.bytes.data();
      d.len = uint32_t(held.bytes.size());
      sink(d);
      ++delivered;
    }
  }
  return delivered;
}

int FaultInjectingPort::Poll(const DatagramSink& sink, int max) {
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(send_mutex_);
    FlushSend(now);
  }
  int delivered = DeliverDueReceived(sink, now);
  const auto due = now + std::chrono::microseconds(options_.delay_us);
  auto copy_in = [due](const InDatagram& d) {
    Held h;
    h.due = due;
    h.peer = d.from;
    h.local = d.local;
    h.bytes.assign(d.data, d.data + d.len);
    return h;
  };
  auto filter = [&](const InDatagram& d) {
    bool duplicate = false;
    switch (Draw(options_.receive, receive_rng_, receive_counters_, !Spared(d.data, d.len),
                 &duplicate)) {
      case Fate::kDrop:
        return;
      case Fate::kDelay:
        Hold(receive_delayed_, copy_in(d), receive_counters_);
        return;
      case Fate::kReorder:
        Hold(receive_reordered_, copy_in(d), receive_counters_);
        return;
      case Fate::kPass:
        sink(d);
        ++delivered;
        if (duplicate) {
          sink(d);
          ++delivered;
        }
        while (!receive_reordered_.empty()) {
          ++receive_counters_.reordered;
          const Held held = std::move(receive_reordered_.front());
          receive_reordered_.pop_front();
          InDatagram late;
          late.from = held.peer;
          late.local = held.local;
          late.data = held.bytes.data();
          late.len = uint32_t(held.bytes.size());
          sink(late);
          ++delivered;
        }
        return;
    }
  };
  if (max > delivered) inner_->Poll(filter, max - delivered);
  return delivered;
}

}  // namespace softrdma::roce
