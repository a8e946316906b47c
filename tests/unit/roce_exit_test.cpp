// At process exit nothing new is executed (docs/design.md "Process exit"):
// the application's memory and the fds its CQs notify may be gone. The exit
// still reads the RoCE port until empty, to forward what belongs to other
// processes of ours, but drops what reaches its own QPs: no completion, no
// ACK. Before, the exit settle executed and acknowledged it, as a destroy
// does.
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine_test_support.h"
#include "roce_transport_fixture.h"

namespace softrdma {
namespace {

using namespace softrdma::verbs;
using testing::kAckOpcode;
using testing::RoceTransport;

constexpr int kSends = 8;

class RoceExit : public RoceTransport {
 protected:
  // In the death test's child: kSends SENDs from a to b stay in the port
  // (only this thread's polls take datagrams, and it polls none) and the
  // process exits. An ACK sent from then on ends it with code 3.
  void SendAndExitWithTheSendsUnread() {
    MakePair();
    static std::vector<uint8_t> src(64, 0x5a), dst(size_t{kSends} * 64, 0);
    ibv_mr* smr = Register(src);
    ibv_mr* dmr = Register(dst);
    for (int i = 0; i < kSends; ++i) PostRecv(b_, dmr, dst.data() + i * 64, 64, i);
    port_->DeliverOnlyTo(std::this_thread::get_id());
    for (int i = 0; i < kSends; ++i)
      if (Post(a_, IBV_WR_SEND, smr, src.data(), 64, i) != 0) std::_Exit(2);
    port_->SetDropIf([](const std::vector<uint8_t>& b, uint64_t) {
      if (!b.empty() && b[0] == kAckOpcode) {
        std::fprintf(stderr, "ACK sent at exit\n");
        std::_Exit(3);
      }
      return false;
    });
    std::fprintf(stderr, "%zu SENDs unread at exit\n", port_->Queued());
    testing::RemoveOwnRegistry();  // the engine keeps its mapping; no TearDown runs here
    std::exit(0);
  }
};

TEST_F(RoceExit, NothingReachingOurQpsIsExecutedAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Code 3: a SEND was executed and acknowledged at exit; 2: not posted.
  EXPECT_EXIT(SendAndExitWithTheSendsUnread(), ::testing::ExitedWithCode(0),
              "8 SENDs unread at exit");
}

}  // namespace
}  // namespace softrdma
