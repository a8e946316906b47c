// Cutting a message (a list of buffers) into the pieces sent as fragments.
#pragma once

#include <algorithm>
#include <cstdint>

#include <sys/uio.h>

namespace softrdma::transport {

// Writes to `out` the iovecs that cover bytes [offset, offset + len) of the
// `n` buffers in `in`; returns how many it wrote (at most n).
inline int SliceIovecs(const iovec* in, int n, uint64_t offset, uint64_t len, iovec* out) {
  int count = 0;
  for (int i = 0; i < n && len; ++i) {
    if (offset >= in[i].iov_len) {
      offset -= in[i].iov_len;
      continue;
    }
    uint64_t take = std::min<uint64_t>(in[i].iov_len - offset, len);
    out[count++] = iovec{static_cast<uint8_t*>(in[i].iov_base) + offset, take};
    len -= take;
    offset = 0;
  }
  return count;
}

}  // namespace softrdma::transport
