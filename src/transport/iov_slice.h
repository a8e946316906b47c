// Cutting a message (a list of buffers) into the pieces sent as fragments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <sys/uio.h>

#include "core/limits.h"

namespace softrdma::transport {

// The most buffers a message has here (limits::kMaxSge).
inline constexpr int kMaxIovecs = limits::kMaxSge;

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

// Copies the bytes of the `nsrc` buffers in `src`, in order, into the `ndst`
// buffers in `dst` (at most as many as `dst` holds).
inline void CopyIovecs(const iovec* src, int nsrc, const iovec* dst, int ndst) {
  uint64_t offset = 0;
  for (int s = 0; s < nsrc; ++s) {
    iovec pieces[kMaxIovecs];
    const int n = SliceIovecs(dst, std::min(ndst, kMaxIovecs), offset, src[s].iov_len, pieces);
    const auto* from = static_cast<const uint8_t*>(src[s].iov_base);
    for (int k = 0; k < n; ++k) {
      memcpy(pieces[k].iov_base, from, pieces[k].iov_len);
      from += pieces[k].iov_len;
    }
    offset += src[s].iov_len;
  }
}

}  // namespace softrdma::transport
