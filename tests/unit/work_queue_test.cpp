// WorkQueue: the depth the application asked for is what it gets, whatever
// the power-of-two storage behind it; indices map to slots consistently
// across wrap-around, and each slot has its own SGE list.
#include <gtest/gtest.h>

#include "core/qp.h"

namespace softrdma {
namespace {

TEST(WorkQueue, FullAtTheRequestedDepthNotAtTheStorageSize) {
  WorkQueue<SendWqe> q;
  q.Init(5, 2);
  EXPECT_EQ(q.capacity(), 5u);
  EXPECT_EQ(q.slots(), 8u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(q.full()) << i;
    ++q.head;
  }
  EXPECT_TRUE(q.full());
  ++q.tail;
  EXPECT_FALSE(q.full());
}

TEST(WorkQueue, DepthZeroIsAlwaysFull) {
  WorkQueue<RecvWqe> q;
  q.Init(0, 0);
  EXPECT_EQ(q.capacity(), 0u);
  EXPECT_TRUE(q.full());
  EXPECT_EQ(q.max_sge, 1u);
}

TEST(WorkQueue, EntriesSurviveWrapAroundOfTheCounters) {
  WorkQueue<RecvWqe> q;
  q.Init(3, 2);
  // Start just below the 32-bit wrap so the free-running counters overflow.
  q.head = q.tail = 0xfffffff0u;
  for (uint64_t n = 0; n < 100; ++n) {
    while (!q.full()) {
      const uint32_t i = q.head++;
      q.at(i).wr_id = i;
      q.sge_of(i)[0].addr = i;
      q.sge_of(i)[1].addr = ~static_cast<uint64_t>(i);
    }
    const uint32_t i = q.tail++;
    ASSERT_EQ(q.at(i).wr_id, i);
    ASSERT_EQ(q.sge_of(i)[0].addr, i);
    ASSERT_EQ(q.sge_of(i)[1].addr, ~static_cast<uint64_t>(i));
  }
}

TEST(WorkQueue, LiveIndicesUseDistinctSlots) {
  WorkQueue<SendWqe> q;
  q.Init(6, 1);
  q.head = q.tail = 0xfffffffdu;
  for (uint32_t a = q.tail; a != q.tail + q.capacity(); ++a)
    for (uint32_t b = a + 1; b != q.tail + q.capacity(); ++b) {
      EXPECT_NE(q.slot(a), q.slot(b));
      EXPECT_NE(&q.at(a), &q.at(b));
      EXPECT_NE(q.sge_of(a), q.sge_of(b));
    }
}

}  // namespace
}  // namespace softrdma
