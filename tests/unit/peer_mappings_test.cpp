// The initiator's cache of a peer's exported extents
// (transport/peer_mappings.h), here with this process as its own "peer":
// a resolved address aliases the exported pages, a released extent is
// unmapped once the peer's `retired` moves, and a pin delays that unmap.
#include "transport/peer_mappings.h"

#include <sys/mman.h>
#include <unistd.h>

#include <memory>

#include <gtest/gtest.h>

#include "core/memory_export.h"

namespace softrdma::transport {
namespace {

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

bool Mapped(const void* p) {
  unsigned char v;
  return mincore(const_cast<void*>(p), 1, &v) == 0;
}

class PeerMappingsTest : public ::testing::Test {
 protected:
  PeerMappingsTest()
      : table_(new ExtentTable()), exporter_(table_.get()), peer_(getpid(), table_.get()) {
    for (auto*& m : mem_) {
      m = static_cast<uint8_t*>(
          mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      m[kPage] = 0x5a;
    }
  }
  ~PeerMappingsTest() override {
    for (auto* m : mem_) munmap(m, 4 * kPage);
  }
  uint64_t At(int i, uint64_t off) const { return reinterpret_cast<uint64_t>(mem_[i]) + off; }

  std::unique_ptr<ExtentTable> table_;
  MemoryExporter exporter_;
  PeerMappings peer_;
  uint8_t* mem_[2] = {};
};

TEST_F(PeerMappingsTest, ResolvedAddressAliasesTheExportedPages) {
  uint32_t slot = exporter_.Export(At(0, 0), 4 * kPage);
  ASSERT_NE(slot, 0u);
  uint8_t* p = peer_.Resolve(slot, At(0, kPage), 8);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p, mem_[0] + kPage);  // a second mapping...
  EXPECT_EQ(*p, 0x5a);
  *p = 0x6b;  // ...of the same pages
  EXPECT_EQ(mem_[0][kPage], 0x6b);
  EXPECT_EQ(peer_.Resolve(slot, At(0, kPage), 8), p) << "cached";
  EXPECT_EQ(peer_.Resolve(slot, At(0, 3 * kPage), kPage + 1), nullptr) << "beyond the extent";
  EXPECT_EQ(peer_.Resolve(0, At(0, kPage), 8), nullptr);
  EXPECT_EQ(peer_.Resolve(slot + 1, At(0, kPage), 8), nullptr) << "free slot";
  exporter_.Release(slot);
}

TEST_F(PeerMappingsTest, ReleasedExtentIsUnmappedAfterTheLastPin) {
  uint32_t a = exporter_.Export(At(0, 0), 4 * kPage);
  uint32_t b = exporter_.Export(At(1, 0), 4 * kPage);
  ASSERT_TRUE(a && b);
  uint8_t* pa = peer_.Resolve(a, At(0, 0), 8);
  ASSERT_NE(pa, nullptr);
  {
    PeerMappings::Pinned pin(&peer_);
    exporter_.Release(a);                               // the peer deregisters
    EXPECT_NE(peer_.Resolve(b, At(1, 0), 8), nullptr);  // notices `retired`, drops a
    EXPECT_EQ(peer_.Resolve(a, At(0, 0), 8), nullptr);
    EXPECT_TRUE(Mapped(pa)) << "still pinned";
  }
  EXPECT_FALSE(Mapped(pa)) << "unmapped with the last pin";
  // Without a pin the drop is immediate (c is mapped first, so that the
  // sweep maps nothing new that could land at pb's address).
  uint8_t* pb = peer_.Resolve(b, At(1, 0), 8);
  uint32_t c = exporter_.Export(At(0, 0), 4 * kPage);
  ASSERT_NE(c, 0u);
  ASSERT_NE(peer_.Resolve(c, At(0, 0), 8), nullptr);
  exporter_.Release(b);
  EXPECT_NE(peer_.Resolve(c, At(0, 0), 8), nullptr);
  EXPECT_FALSE(Mapped(pb));
  exporter_.Release(c);
}

}  // namespace
}  // namespace softrdma::transport
