#include "transport/responder_resources.h"

#include <algorithm>

namespace softrdma::transport {

namespace {

// a - b in 24-bit PSN space, as a signed distance.
int32_t PsnDistance(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}

}  // namespace

void ResponderResources::Reset(uint32_t max_dest_rd_atomic) {
  entries_.assign(std::max<uint32_t>(1, max_dest_rd_atomic), ExecutedRequest{});
  next_ = 0;
}

ExecutedRequest& ResponderResources::Next() {
  if (entries_.empty()) Reset(1);  // a QP that never passed RTR's Reset
  ExecutedRequest& e = entries_[next_];
  next_ = (next_ + 1) % static_cast<uint32_t>(entries_.size());
  return e;
}

void ResponderResources::RecordRead(uint32_t first_psn, uint32_t last_psn, uint64_t va,
                                    uint32_t rkey, uint32_t length, uint32_t pd_id) {
  Next() = ExecutedRequest{true, false, first_psn, last_psn, va, rkey, length, pd_id, 0};
}

void ResponderResources::RecordAtomic(uint32_t psn, uint64_t va, uint32_t rkey, uint64_t original,
                                      uint32_t pd_id) {
  Next() = ExecutedRequest{true, true, psn, psn, va, rkey, 8, pd_id, original};
}

const ExecutedRequest* ResponderResources::ReadToReplay(uint32_t psn, uint32_t rkey, uint64_t va,
                                                        uint32_t length) const {
  for (const ExecutedRequest& e : entries_) {
    if (!e.valid || e.atomic || PsnDistance(psn, e.first_psn) < 0 ||
        PsnDistance(psn, e.last_psn) > 0)
      continue;
    const bool part = rkey == e.rkey && va >= e.va && va + length <= e.va + e.length;
    return part ? &e : nullptr;
  }
  return nullptr;
}

const ExecutedRequest* ResponderResources::AtomicToReplay(uint32_t psn) const {
  for (const ExecutedRequest& e : entries_)
    if (e.valid && e.atomic && e.first_psn == psn) return &e;
  return nullptr;
}

}  // namespace softrdma::transport
