// A RoCE WRITE whose target application spins on the written memory and
// polls its CQ only now and then (ib_write_lat: once per iteration, for its
// own send) must land without waiting for that application: on a NIC it
// lands by DMA. The progress thread, which watches such an application
// instead of sleeping on the port, takes datagrams left on the port after a
// grace (Engine::WatchRocePort). Before, the WRITE waited in the port until
// the end of the watch's window (up to 16 ms) or a retransmit timer's look:
// ib_write_lat over SOFTRDMA_WIRE=roce took ~6 ms per iteration.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "roce_transport_fixture.h"
#include "wake_chain.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::QpOptions;

class RoceWriteLeft : public testing::RoceTransport {
 protected:
  // The watcher thread needs a readable fd, as the UDP port has.
  bool WithFd() const override { return true; }
  // One run of kIterations WRITEs of the values first + 1, first + 2, ...
  // from a_ to dst, each timed together with a reference chain started at
  // the same moment. false (with a failure recorded): a WRITE or a chain
  // never ended, or a send failed.
  bool TimeWrites(uint64_t first, std::vector<uint8_t>& src, ibv_mr* src_mr,
                  std::vector<uint8_t>& dst, ibv_mr* dst_mr, testing::WakeChain& chain,
                  std::vector<uint64_t>* waits, std::vector<uint64_t>* chain_waits);
};

constexpr int kIterations = 60;
// Timeout 18 (~1.07 s): no retransmit timer or tail-loss probe looks at the
// port within an iteration, only the watch can.
constexpr uint8_t kLongTimeout = 18;
// The median time a WRITE takes to land. Before: 1.06-3.1 ms in 7 of 8 runs
// (the watch's windows, 1 ms doubling to 16 ms, cut short by its 5 ms timer
// checks; 24 us in the eighth, where the watch happened to end between
// iterations); after: ~110 us (the 50 us grace plus the timer slack of the
// thread's sleep).
// The spin reads memory that an RDMA WRITE fills with a plain copy from the
// progress thread: a race in the C++ model that every RDMA program accepts
// (a NIC writes by DMA). ThreadSanitizer is told to leave these reads out.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
void IgnoreReadsBegin() {
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
}
void IgnoreReadsEnd() {
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
void IgnoreReadsBegin() {}
void IgnoreReadsEnd() {}
#endif

// Wall time alone is stretched by load whatever the engine does: pinned to
// one CPU beside 6 busy loops at nice 19, the median went to 17-29 ms (the
// spin itself waits that long for a CPU), as far as its defect's ~8 ms idle.
// So the bound is relative: with each WRITE the test starts the same chain
// of wake-ups made by two threads of its own (WakeChain: one woken in
// poll() wakes the other, which sleeps the grace and stores), and the same
// spin times both, at the same moments on the same CPUs. The WRITEs' median
// must stay under kReferenceFactor times the chain's. Measured (medians):
// nice 0, load ~8: WRITE 110-194 us, chain 115-152 us; pinned beside 6 busy
// loops: 26-28 ms both; its defect (WatchRocePort never looking) at nice 0:
// 1.06-1.93 ms against a bound of ~500 us, 5/5 failures. Under load the
// thread is often asleep rather than watching when a WRITE comes, and then
// takes it at once, defect or not: a loaded run need not fail on the defect.
constexpr uint64_t kReferenceFactor = 4;
constexpr uint64_t kGraceNs = 50000;           // as kRoceAppGraceNs
constexpr uint64_t kLandBoundNs = 2000000000;  // 2 s: a WRITE that never lands

uint64_t Median(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool RoceWriteLeft::TimeWrites(uint64_t first, std::vector<uint8_t>& src, ibv_mr* src_mr,
                               std::vector<uint8_t>& dst, ibv_mr* dst_mr, testing::WakeChain& chain,
                               std::vector<uint64_t>* waits, std::vector<uint64_t>* chain_waits) {
  auto* target = reinterpret_cast<uint64_t*>(dst.data());
  for (uint64_t i = first + 1; i <= first + kIterations; ++i) {
    std::memcpy(src.data(), &i, sizeof i);
    if (Post(a_, IBV_WR_RDMA_WRITE, src_mr, src.data(), 8, i,
             reinterpret_cast<uintptr_t>(dst.data()), dst_mr->rkey) != 0) {
      ADD_FAILURE() << "iteration " << i << ": post failed";
      return false;
    }
    // The reference runs at the same time, on the same CPUs: started now,
    // as the WRITE's datagram was just sent, and watched by the same spin
    // (no verb in it: the application must look as one spinning on memory).
    const uint64_t start = NowNs();
    const uint64_t round = chain.Start();
    uint64_t landed_at = 0, chain_at = 0, waited = 0;
    IgnoreReadsBegin();
    while ((!landed_at || !chain_at) && waited < kLandBoundNs) {
      waited = NowNs() - start;
      if (!landed_at && __atomic_load_n(target, __ATOMIC_ACQUIRE) == i) landed_at = waited + 1;
      if (!chain_at && chain.Done(round)) chain_at = waited + 1;
    }
    IgnoreReadsEnd();
    if (!landed_at || !chain_at) {
      ADD_FAILURE() << "iteration " << i << ": the " << (landed_at ? "wake-up chain" : "WRITE")
                    << " never ended";
      return false;
    }
    waits->push_back(landed_at);
    chain_waits->push_back(chain_at);
    // Then, as ib_write_lat, the send's completion: the application polls.
    auto s = Wait(cq_a_, 1);
    if (s.size() != 1 || s[0].status != IBV_WC_SUCCESS) {
      ADD_FAILURE() << "iteration " << i << ": no successful send completion";
      return false;
    }
  }
  return true;
}

TEST_F(RoceWriteLeft, WriteLandsWhileTheTargetSpinsOnMemory) {
  QpOptions o;
  o.timeout = kLongTimeout;
  MakePair(o);
  std::vector<uint8_t> src(8), dst(8);
  ibv_mr* src_mr = Register(src);
  ibv_mr* dst_mr = Register(dst);
  testing::WakeChain chain(kGraceNs);
  ASSERT_TRUE(chain.ok()) << "eventfd: " << std::strerror(errno);
  // Runs until two are under their bound (pass) or two are not (fail): one
  // in 30 runs at nice 19 under load 15 went over (median 3.1 ms against a
  // chain of 0.6 ms: other processes' slices fell on the WRITEs and not on
  // the chain), and its defect (WatchRocePort never looking) at nice 0 under
  // load 13 stayed under it in 1 of 9 runs (a chain stretched to 4 ms), so
  // a majority fails less often in health (~3 x (1/30)^2) and misses the
  // defect less often (~3 x (1/9)^2) than one run.
  int under = 0, over = 0;
  for (int attempt = 0; under < 2 && over < 2; ++attempt) {
    std::vector<uint64_t> waits, chain_waits;
    ASSERT_TRUE(
        TimeWrites(attempt * kIterations, src, src_mr, dst, dst_mr, chain, &waits, &chain_waits));
    const uint64_t median = Median(waits);
    const uint64_t reference = Median(chain_waits);
    const uint64_t bound = kReferenceFactor * reference;
    std::printf(
        "run %d: WRITE landed after: median %lu us, max %lu us; the wake-up chain: median %lu "
        "us; bound %lu us\n",
        attempt, static_cast<unsigned long>(median / 1000),
        static_cast<unsigned long>(*std::max_element(waits.begin(), waits.end()) / 1000),
        static_cast<unsigned long>(reference / 1000), static_cast<unsigned long>(bound / 1000));
    (median < bound ? under : over)++;
  }
  EXPECT_EQ(under, 2) << "in 2 of " << under + over
                      << " runs the WRITEs' median was over the bound: the WRITE waited in the "
                         "port for the application";
}

}  // namespace
}  // namespace softrdma
