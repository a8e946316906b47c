// The responder's memory of the READ and atomic requests it executed, kept
// to answer their duplicates (rc-transport.md §4.3) the same way on both
// wires: a duplicate READ that asks for (a part of) a remembered READ is
// executed again from the MR (the data may have changed since), a duplicate
// atomic gets the remembered result again and never executes twice, and a
// duplicate of a request no longer remembered is dropped. The memory holds
// max_dest_rd_atomic entries (at least one), recycled oldest first: a
// requester keeps at most that many READ/atomics outstanding, so only older
// ones, answered long ago, are forgotten.
#pragma once

#include <cstdint>
#include <vector>

namespace softrdma::transport {

// One executed READ or atomic. A READ spans PSNs [first_psn, last_psn] (one
// per response packet on the RoCE wire, a single one on the shm wire).
struct ExecutedRequest {
  bool valid = false;
  bool atomic = false;
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint32_t pd_id = 0;     // the PD its rkey was checked against
  uint64_t original = 0;  // atomic: the value before it, its result
};

class ResponderResources {
 public:
  // At RTR (and RESET): forgets everything and keeps `max_dest_rd_atomic`
  // entries from now on (at least one).
  void Reset(uint32_t max_dest_rd_atomic);

  void RecordRead(uint32_t first_psn, uint32_t last_psn, uint64_t va, uint32_t rkey,
                  uint32_t length, uint32_t pd_id);
  void RecordAtomic(uint32_t psn, uint64_t va, uint32_t rkey, uint64_t original, uint32_t pd_id);

  // A duplicate READ at `psn` for [va, va + length) under `rkey`: the READ
  // it repeats if that is remembered and the request asks for a part of it
  // (the requester retries only what it misses), else nullptr (dropped).
  const ExecutedRequest* ReadToReplay(uint32_t psn, uint32_t rkey, uint64_t va,
                                      uint32_t length) const;
  // A duplicate atomic at `psn`: the remembered execution (its result is
  // sent again), or nullptr if it is forgotten (dropped).
  const ExecutedRequest* AtomicToReplay(uint32_t psn) const;

 private:
  ExecutedRequest& Next();

  std::vector<ExecutedRequest> entries_;
  uint32_t next_ = 0;
};

}  // namespace softrdma::transport
