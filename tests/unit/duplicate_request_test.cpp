// Duplicate READ and atomic requests on the shm wire's two-copy path
// (transport/one_sided.cpp), answered with the rule the RoCE responder
// applies too (transport/responder_resources.h). A requester sends a request
// twice when its retransmit timer rewinds it (the responder's process was
// descheduled or stopped for longer than the QP's timeout); here the test is
// the requester: with our inbound ring's consumer lock held, it writes the
// request records itself, hands each to the responder QP as a drain would
// and reads the answers the responder put into the same ring.
#include <gtest/gtest.h>

#include "transport/responder_resources.h"
#include "two_copy_responder_fixture.h"

namespace softrdma {
namespace {

using DuplicateRequestTest = testing::TwoCopyResponderTest;
using testing::Answer;

// A duplicate atomic gets the saved result again and does not execute: a
// second fetch-add would add twice, a second compare-and-swap would now
// compare against the swapped value and answer that instead.
TEST_F(DuplicateRequestTest, AtomicIsAnsweredFromItsSavedResultAndExecutesOnce) {
  memory_[0] = 100;
  const auto kFetchAdd = wire::RecordType::kAtomic;
  ExpectAtomicAnswer(Deliver(kFetchAdd, 0, Addr(0), 8, 5), 0, 100);
  EXPECT_EQ(memory_[0], 105u);
  ExpectAtomicAnswer(Deliver(kFetchAdd, 0, Addr(0), 8, 5), 0, 100);
  EXPECT_EQ(memory_[0], 105u) << "the duplicate fetch-add executed again";

  ExpectAtomicAnswer(Deliver(kFetchAdd, 1, Addr(0), 8, 105, 7, /*cmp_swap=*/true), 1, 105);
  EXPECT_EQ(memory_[0], 7u);
  ExpectAtomicAnswer(Deliver(kFetchAdd, 1, Addr(0), 8, 105, 7, true), 1, 105);
  EXPECT_EQ(memory_[0], 7u);
  EXPECT_EQ(ExpectedPsn(), 2u) << "duplicates do not move the expected PSN";
}

// A duplicate READ is executed again from the MR: it returns what the
// memory holds now, not a copy kept from the first time.
TEST_F(DuplicateRequestTest, ReadIsReadAgainFromTheMr) {
  memory_[8] = 0x1111111111111111ull;
  memory_[9] = 0x2222222222222222ull;
  Answer first = Deliver(wire::RecordType::kRead, 0, Addr(8), 16);
  ASSERT_TRUE(first.any);
  EXPECT_EQ(first.h.type, wire::RecordType::kReadResponse);
  EXPECT_EQ(first.h.psn, 0u);
  ASSERT_EQ(first.payload.size(), 16u);
  EXPECT_EQ(memcmp(first.payload.data(), &memory_[8], 16), 0);

  memory_[9] = 0x3333333333333333ull;  // changed since
  Answer again = Deliver(wire::RecordType::kRead, 0, Addr(8), 16);
  ASSERT_TRUE(again.any) << "the duplicate READ was not answered";
  EXPECT_EQ(again.h.type, wire::RecordType::kReadResponse);
  EXPECT_EQ(again.h.psn, 0u);
  EXPECT_TRUE(again.h.flags & wire::kFlagLastFragment);
  ASSERT_EQ(again.payload.size(), 16u);
  EXPECT_EQ(memcmp(again.payload.data(), &memory_[8], 16), 0);

  // A part of it (what a requester that lost the tail asks for) too.
  Answer part = Deliver(wire::RecordType::kRead, 0, Addr(9), 8);
  ASSERT_TRUE(part.any);
  ASSERT_EQ(part.payload.size(), 8u);
  EXPECT_EQ(memcmp(part.payload.data(), &memory_[9], 8), 0);
  EXPECT_EQ(ExpectedPsn(), 1u);
}

// What the responder cannot have executed is not answered: a "duplicate"
// READ for more than the original, and one of a forgotten atomic (beyond
// max_dest_rd_atomic = 2 executions ago), as on the RoCE wire.
TEST_F(DuplicateRequestTest, WhatIsNotRememberedIsDropped) {
  memory_[16] = 1;
  ASSERT_TRUE(Deliver(wire::RecordType::kRead, 0, Addr(16), 8).any);
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(16), 16).any);
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(17), 8).any);
  for (uint32_t psn = 1; psn <= 3; ++psn)
    ASSERT_TRUE(Deliver(wire::RecordType::kAtomic, psn, Addr(16), 8, 1).any);
  EXPECT_EQ(memory_[16], 4u);
  EXPECT_FALSE(Deliver(wire::RecordType::kAtomic, 1, Addr(16), 8, 1).any) << "forgotten";
  EXPECT_FALSE(Deliver(wire::RecordType::kRead, 0, Addr(16), 8).any) << "forgotten";
  ExpectAtomicAnswer(Deliver(wire::RecordType::kAtomic, 3, Addr(16), 8, 1), 3, 3);
  EXPECT_EQ(memory_[16], 4u);
}

// The rule itself, as both wires use it.
TEST(ResponderResources, RemembersMaxDestRdAtomicRequestsOldestFirst) {
  transport::ResponderResources r;
  r.Reset(2);
  r.RecordRead(10, 13, 0x1000, 7, 4096, 1);  // a READ of 4 response packets
  r.RecordAtomic(14, 0x2000, 7, 42, 1);
  EXPECT_NE(r.ReadToReplay(12, 7, 0x1800, 1024), nullptr) << "a part, from a later packet";
  EXPECT_EQ(r.ReadToReplay(12, 8, 0x1800, 1024), nullptr) << "another rkey";
  EXPECT_EQ(r.ReadToReplay(12, 7, 0x1800, 4096), nullptr) << "beyond the original";
  EXPECT_EQ(r.ReadToReplay(14, 7, 0x1000, 8), nullptr) << "the atomic's PSN";
  ASSERT_NE(r.AtomicToReplay(14), nullptr);
  EXPECT_EQ(r.AtomicToReplay(14)->original, 42u);
  EXPECT_EQ(r.AtomicToReplay(13), nullptr);
  r.RecordAtomic(15, 0x2000, 7, 43, 1);  // recycles the READ's entry
  EXPECT_EQ(r.ReadToReplay(10, 7, 0x1000, 8), nullptr);
  EXPECT_NE(r.AtomicToReplay(14), nullptr);
  r.RecordRead(0xfffffe, 0x000001, 0x1000, 7, 4096, 1);  // across the PSN wrap
  EXPECT_NE(r.ReadToReplay(0, 7, 0x1000, 8), nullptr);
  EXPECT_EQ(r.AtomicToReplay(14), nullptr);
  r.Reset(0);  // at least one entry, none valid
  EXPECT_EQ(r.AtomicToReplay(15), nullptr);
}

}  // namespace
}  // namespace softrdma
