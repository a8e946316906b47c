// Slicing and copying iovec lists (transport/iov_slice.h).
#include "transport/iov_slice.h"

#include <string>

#include <gtest/gtest.h>

namespace softrdma::transport {
namespace {

TEST(IovSlice, SliceCoversTheRequestedBytes) {
  char a[5], b[3], c[7];
  iovec in[3] = {{a, 5}, {b, 3}, {c, 7}};
  iovec out[3];
  ASSERT_EQ(SliceIovecs(in, 3, 4, 6, out), 3);
  EXPECT_EQ(out[0].iov_base, a + 4);
  EXPECT_EQ(out[0].iov_len, 1u);
  EXPECT_EQ(out[1].iov_base, b);
  EXPECT_EQ(out[1].iov_len, 3u);
  EXPECT_EQ(out[2].iov_base, c);
  EXPECT_EQ(out[2].iov_len, 2u);
}

TEST(IovSlice, CopyMovesBytesAcrossDifferentSplits) {
  std::string src1 = "hello, ", src2 = "scattered world";
  iovec src[2] = {{src1.data(), src1.size()}, {src2.data(), src2.size()}};
  char d1[4], d2[9], d3[20];
  iovec dst[3] = {{d1, 4}, {d2, 9}, {d3, 20}};
  CopyIovecs(src, 2, dst, 3);
  std::string got = std::string(d1, 4) + std::string(d2, 9) + std::string(d3, 9);
  EXPECT_EQ(got, "hello, scattered world");
}

}  // namespace
}  // namespace softrdma::transport
