// FaultInjectingPort over an in-memory loop port: each fault does what it
// says, in the direction it is set for, and the choices repeat with a seed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "wire/roce/fault_port.h"

namespace softrdma::roce {
namespace {

// Whatever is sent comes back at the next Poll; accepts at most `room`
// datagrams per Send (like a full socket buffer) when room >= 0.
class LoopPort : public PacketPort {
 public:
  int room = -1;
  int Send(const OutDatagram* datagrams, int n) override {
    const int take = room < 0 ? n : std::min(n, room);
    for (int i = 0; i < take; ++i) {
      std::vector<uint8_t> bytes;
      for (int p = 0; p < datagrams[i].nparts; ++p) {
        const auto* b = static_cast<const uint8_t*>(datagrams[i].parts[p].iov_base);
        bytes.insert(bytes.end(), b, b + datagrams[i].parts[p].iov_len);
      }
      queue_.push_back(std::move(bytes));
    }
    return take;
  }
  int Poll(const DatagramSink& sink, int max) override {
    int n = 0;
    while (!queue_.empty() && n < max) {
      const std::vector<uint8_t> bytes = std::move(queue_.front());
      queue_.pop_front();
      InDatagram d;
      d.data = bytes.data();
      d.len = uint32_t(bytes.size());
      sink(d);
      ++n;
    }
    return n;
  }

 private:
  std::deque<std::vector<uint8_t>> queue_;
};

struct Harness {
  LoopPort* loop;
  std::unique_ptr<FaultInjectingPort> port;
  explicit Harness(const FaultOptions& options) {
    auto inner = std::make_unique<LoopPort>();
    loop = inner.get();
    port = std::make_unique<FaultInjectingPort>(std::move(inner), options);
  }
  // Sends datagrams numbered first..first+count-1 (one byte each).
  void SendNumbers(uint8_t first, int count) {
    std::vector<uint8_t> values(static_cast<size_t>(count) + 0);
    std::vector<OutDatagram> out(values.size());
    for (int i = 0; i < count; ++i) {
      values[size_t(i)] = uint8_t(first + i);
      out[size_t(i)].parts[0] = {&values[size_t(i)], 1};
      out[size_t(i)].nparts = 1;
    }
    ASSERT_EQ(port->Send(out.data(), count), count);
  }
  std::vector<uint8_t> Receive() {
    std::vector<uint8_t> got;
    port->Poll([&](const InDatagram& d) { got.push_back(d.data[0]); }, 1 << 20);
    return got;
  }
  // Receives until nothing is held any more (delays of 1 ms at most here).
  std::vector<uint8_t> ReceiveAll() {
    std::vector<uint8_t> got = Receive();
    for (int i = 0; i < 200 && port->holding(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const auto more = Receive();
      got.insert(got.end(), more.begin(), more.end());
    }
    return got;
  }
};

std::vector<uint8_t> Numbers(int count) {
  std::vector<uint8_t> v;
  for (int i = 0; i < count; ++i) v.push_back(uint8_t(i));
  return v;
}

TEST(FaultPort, NoFaultsPassesEverythingInOrder) {
  Harness h{FaultOptions{}};
  h.SendNumbers(0, 50);
  EXPECT_EQ(h.Receive(), Numbers(50));
  EXPECT_EQ(h.port->send_counters().passed, 50u);
  EXPECT_EQ(h.port->receive_counters().passed, 50u);
}

TEST(FaultPort, DropOnSendOrOnReceive) {
  for (bool on_send : {true, false}) {
    FaultOptions o;
    (on_send ? o.send : o.receive).drop = 1.0;
    Harness h{o};
    h.SendNumbers(0, 20);
    EXPECT_TRUE(h.ReceiveAll().empty());
    EXPECT_EQ((on_send ? h.port->send_counters() : h.port->receive_counters()).dropped, 20u);
  }
}

TEST(FaultPort, SparedAcksAreNeverDropped) {
  for (bool on_send : {true, false}) {
    FaultOptions o;
    (on_send ? o.send : o.receive).drop = 1.0;
    o.spare_acks = true;
    Harness h{o};
    h.SendNumbers(0x10, 3);  // 0x10 (READ response middle), 0x11 (ACKNOWLEDGE), 0x12
    EXPECT_EQ(h.ReceiveAll(), (std::vector<uint8_t>{0x11}));
  }
}

TEST(FaultPort, DuplicateOnSendOrOnReceive) {
  for (bool on_send : {true, false}) {
    FaultOptions o;
    (on_send ? o.send : o.receive).duplicate = 1.0;
    Harness h{o};
    h.SendNumbers(0, 3);
    EXPECT_EQ(h.ReceiveAll(), (std::vector<uint8_t>{0, 0, 1, 1, 2, 2}));
  }
}

TEST(FaultPort, ReorderedDatagramGoesBehindTheNextOne) {
  FaultOptions o;
  o.send.reorder = 0.5;
  o.seed = 7;
  Harness h{o};
  h.SendNumbers(0, 200);
  const auto got = h.ReceiveAll();
  EXPECT_GT(h.port->send_counters().reordered, 0u);
  EXPECT_NE(got, Numbers(200));
  auto sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Numbers(200));  // nothing lost, nothing twice
}

TEST(FaultPort, DelayedDatagramComesAfterItsDelay) {
  FaultOptions o;
  o.receive.delay = 1.0;
  o.delay_us = 20000;
  Harness h{o};
  const auto start = std::chrono::steady_clock::now();
  h.SendNumbers(0, 5);
  EXPECT_TRUE(h.Receive().empty());
  EXPECT_TRUE(h.port->holding());
  std::vector<uint8_t> got;
  while (got.size() < 5 && std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
    const auto more = h.Receive();
    got.insert(got.end(), more.begin(), more.end());
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_EQ(got, Numbers(5));
  EXPECT_EQ(h.port->receive_counters().delayed, 5u);
}

// At exit the engine flushes the port: what a delay still holds is on the
// wire already and must arrive (a last ACK among it), not vanish.
TEST(FaultPort, FlushHeldSendsWhatWaitsAtOnceInOrder) {
  FaultOptions o;
  o.send.delay = 1.0;
  o.delay_us = 10'000'000;
  Harness h{o};
  h.SendNumbers(0, 5);
  EXPECT_TRUE(h.Receive().empty());
  EXPECT_TRUE(h.port->holding());
  h.port->FlushHeld();
  EXPECT_FALSE(h.port->holding());
  EXPECT_EQ(h.Receive(), Numbers(5));
  EXPECT_EQ(h.port->send_counters().delayed, 5u);
}

TEST(FaultPort, SameSeedSameChoices) {
  FaultOptions o;
  o.send.drop = 0.2;
  o.send.duplicate = 0.2;
  o.receive.drop = 0.1;
  o.seed = 42;
  Harness first{o}, second{o};
  first.SendNumbers(0, 250);
  second.SendNumbers(0, 250);
  const auto a = first.ReceiveAll(), b = second.ReceiveAll();
  EXPECT_EQ(a, b);
  EXPECT_GT(first.port->send_counters().dropped, 20u);
  EXPECT_LT(first.port->send_counters().dropped, 80u);
  o.seed = 43;
  Harness third{o};
  third.SendNumbers(0, 250);
  EXPECT_NE(third.ReceiveAll(), a);
}

TEST(FaultPort, DatagramsTheInnerPortRefusesAreSentLaterInOrder) {
  FaultOptions o;
  o.send.duplicate = 1e-9;  // a fault port with (practically) no faults
  Harness h{o};
  h.loop->room = 2;
  h.SendNumbers(0, 5);  // 2 go now, 3 wait
  EXPECT_TRUE(h.port->holding());
  h.loop->room = -1;
  EXPECT_EQ(h.ReceiveAll(), Numbers(5));  // Poll sent the 3 first, behind the 2
  EXPECT_FALSE(h.port->holding());
}

TEST(FaultPort, OptionsFromTheEnvironment) {
  setenv("SOFTRDMA_ROCE_FAULT_SEND_DROP", "0.05", 1);
  setenv("SOFTRDMA_ROCE_FAULT_RECV_REORDER", "10%", 1);
  setenv("SOFTRDMA_ROCE_FAULT_DELAY_US", "250", 1);
  setenv("SOFTRDMA_ROCE_FAULT_SEED", "9", 1);
  setenv("SOFTRDMA_ROCE_FAULT_SPARE_ACKS", "1", 1);
  FaultOptions o;
  ASSERT_TRUE(FaultOptionsFromEnv(&o).ok());
  EXPECT_DOUBLE_EQ(o.send.drop, 0.05);
  EXPECT_DOUBLE_EQ(o.receive.reorder, 0.10);
  EXPECT_EQ(o.delay_us, 250u);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_TRUE(o.spare_acks);
  EXPECT_TRUE(o.any());
  setenv("SOFTRDMA_ROCE_FAULT_RECV_DUP", "1.5", 1);
  const Status bad = FaultOptionsFromEnv(&o);
  EXPECT_EQ(bad.code(), EINVAL);
  EXPECT_NE(bad.message().find("SOFTRDMA_ROCE_FAULT_RECV_DUP"), std::string::npos);
  setenv("SOFTRDMA_ROCE_FAULT_RECV_DUP", "x", 1);
  EXPECT_EQ(FaultOptionsFromEnv(&o).code(), EINVAL);
  for (const char* name : {"SOFTRDMA_ROCE_FAULT_SEND_DROP", "SOFTRDMA_ROCE_FAULT_RECV_REORDER",
                           "SOFTRDMA_ROCE_FAULT_DELAY_US", "SOFTRDMA_ROCE_FAULT_SEED",
                           "SOFTRDMA_ROCE_FAULT_RECV_DUP", "SOFTRDMA_ROCE_FAULT_SPARE_ACKS"})
    unsetenv(name);
  std::unique_ptr<PacketPort> plain = std::make_unique<LoopPort>();
  PacketPort* before = plain.get();
  ASSERT_TRUE(WrapWithFaultsFromEnv(&plain).ok());
  EXPECT_EQ(plain.get(), before);  // no fault asked: not wrapped
}

}  // namespace
}  // namespace softrdma::roce
