// Our RoCE requester against a responder that is not ours: its ordinary
// ACKs may carry any AETH credit code, 30 included (32768 credits: a NIC or
// rxe responder without SRQ advertises real credits). Code 30 is also how
// our responder repeats a sequence NAK (kNakRepeatSyndrome, docs/design.md
// "Repeated sequence NAKs"), but only as an ACK that makes no progress, for
// a gap it NAKed. Read as a repeat, each ordinary credit-30 ACK of new PSNs
// made our requester go back to the PSN after it and send everything after
// it again: a retransmission storm against such a peer.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "transport/roce/roce_packets.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::kAckOpcode;
using testing::PsnOf;
using testing::QpOptions;
using testing::RoceTransport;
namespace tr = transport::roce;

// What crossed the port: the requests (a's), and the PSNs of the
// responder's ACKs, which the port keeps from a.
struct Traffic {
  std::mutex mutex;
  uint64_t requests = 0;
  std::vector<uint32_t> ack_psns;
  std::vector<uint32_t> TakeAcks() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<uint32_t> out;
    out.swap(ack_psns);
    return out;
  }
};

class RoceForeignAck : public RoceTransport {
 protected:
  void SetUp() override {
    RoceTransport::SetUp();
    QpOptions o;
    // 8.6 s: neither the timer nor its tail-loss probe (at an eighth of it,
    // 1.07 s) plays a part, even on a loaded host. At 18 the probe went
    // after 134 ms, and a run that long under load (249 ms at load 8) sent
    // one packet again.
    o.timeout = 21;
    MakePair(o);
    LoopbackInjectionHeaders(&addr_, &net_);
    traffic_ = std::make_shared<Traffic>();
    port_->SetDropIf([t = traffic_](const std::vector<uint8_t>& packet, uint64_t) {
      std::lock_guard<std::mutex> lock(t->mutex);
      if (packet.size() >= 12 && packet[0] == kAckOpcode) {
        t->ack_psns.push_back(PsnOf(packet));
        return true;
      }
      ++t->requests;
      return false;
    });
  }

  // The foreign responder's ACK of `psn` to a, with AETH credit code 30.
  std::vector<uint8_t> AckWithCreditCode30(uint32_t psn) {
    roce::TransportHeaders h{};
    h.bth.opcode = kAckOpcode;
    h.bth.dest_qp = a_->qp_num;
    h.bth.psn = psn;
    h.aeth.syndrome = tr::kNakRepeatSyndrome;  // an ACK, credit code 30
    h.aeth.msn = ++msn_;
    std::vector<uint8_t> out(128);
    size_t n = 0;
    EXPECT_TRUE(roce::EncodePacket(net_, h, {}, out, &n).ok());
    out.resize(n);
    return out;
  }

  in6_addr addr_{};
  roce::NetworkHeaders net_;
  std::shared_ptr<Traffic> traffic_;
  uint32_t msn_ = 0;
};

// 16 WRITEs of 8 packets each (MTU 1024): b executes them, and each of its
// coalesced ACKs reaches a as the foreign responder's, credit code 30. None
// may be taken for a NAK repeat: every packet goes once. Before: a went back
// at each ACK (retransmits counted one per ACK, packets sent again).
TEST_F(RoceForeignAck, OrdinaryAcksWithCreditCode30DoNotRewind) {
  constexpr int kWrites = 16;
  constexpr uint32_t kBytes = 8192;
  std::vector<uint8_t> src(kWrites * kBytes), dst(kWrites * kBytes, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
  ibv_mr* smr = Register(src);
  ibv_mr* dmr = Register(dst);
  tr::Counters& c = tr::GetCounters();
  const uint64_t retransmits = c.retransmits;
  const uint64_t probes = c.tail_probes;
  for (int i = 0; i < kWrites; ++i)
    ASSERT_EQ(Post(a_, IBV_WR_RDMA_WRITE, smr, src.data() + i * kBytes, kBytes, i + 1,
                   reinterpret_cast<uintptr_t>(dst.data()) + i * kBytes, dmr->rkey),
              0);
  std::vector<ibv_wc> done;
  int acks = 0;
  const uint64_t end = NowNs() + 5'000'000'000ull;
  while (done.size() < kWrites && NowNs() < end) {
    for (uint32_t psn : traffic_->TakeAcks()) {
      port_->Inject(AckWithCreditCode30(psn), addr_, addr_);
      ++acks;
    }
    for (const ibv_wc& wc : Wait(cq_a_, kWrites - done.size(), 1)) done.push_back(wc);
  }
  ASSERT_EQ(done.size(), size_t{kWrites}) << acks << " ACKs injected";
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(done[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(done[i].wr_id, uint64_t(i + 1));
  }
  EXPECT_EQ(src, dst);
  EXPECT_GE(acks, 1);
  EXPECT_EQ(c.retransmits - retransmits, 0u) << acks << " ACKs injected";
  EXPECT_EQ(c.tail_probes - probes, 0u) << "the run outlasted the tail probe's due time (1 s)";
  std::lock_guard<std::mutex> lock(traffic_->mutex);
  EXPECT_EQ(traffic_->requests, uint64_t{kWrites * kBytes / 1024}) << "packets sent again";
}

}  // namespace
}  // namespace softrdma
