// Completion queue: a bounded array of ibv_wc filled by the transport and
// drained by ibv_poll_cq, plus the arming state of ibv_req_notify_cq. When an
// armed CQ receives a completion, one token (the CQ's address) is written to
// its completion channel's pipe, which makes the channel fd readable and
// ibv_get_cq_event return.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include <infiniband/verbs.h>

#include "core/objects.h"
#include "util/spinlock.h"

namespace softrdma {

class Cq {
 public:
  // The public part first: ibv_cq_ex starts with the same fields as ibv_cq.
  ibv_cq_ex cqx;

  Cq(Context* ctx, int cqe, void* cq_context, CompChannel* channel);
  ~Cq();
  ibv_cq* verbs() { return reinterpret_cast<ibv_cq*>(&cqx); }
  static Cq* From(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }

  // Adds a completion. `solicited` marks completions that satisfy a
  // solicited-only arm (solicited receives and every error).
  void Push(const ibv_wc& wc, bool solicited) {
    Emplace(solicited, [&wc](ibv_wc& slot) { slot = wc; });
  }
  // Push, with the completion written by fill(ibv_wc&) straight into its
  // slot (the data path: no ibv_wc built on the stack and copied under the
  // lock). fill must set every field; the slot holds an older completion.
  template <typename Fill>
  [[gnu::always_inline]] void Emplace(bool solicited, Fill&& fill) {
    if (!lock_.try_lock()) [[unlikely]]
      LockSlow();
    std::lock_guard<SpinLock> lock(lock_, std::adopt_lock);
    if (count_ == cap_) [[unlikely]]
      return OverrunWith(fill);
    const uint32_t slot = Wrap(head_ + count_);
    ibv_wc& wc = entries_[slot];
    fill(wc);
    if (stamped_) [[unlikely]]
      Stamp(slot);
    SetCount(count_ + 1);
    if (armed_ != Arm::kNone) [[unlikely]]
      NotifyIfArmed(solicited || wc.status != IBV_WC_SUCCESS);
  }
  // A busy-polling application mostly finds the CQ empty: that answer is
  // inline and takes no lock (a completion racing with it is seen next poll).
  int Poll(int max, ibv_wc* out) { return LooksEmpty() ? 0 : PollSome(max, out); }
  // No completion queued (a racing one is seen by the next look).
  bool LooksEmpty() const { return __atomic_load_n(&count_, __ATOMIC_RELAXED) == 0; }
  int Arm(bool solicited_only);
  int capacity() const { return static_cast<int>(cap_); }
  int depth() const;
  CompChannel* channel() const { return channel_; }
  Context* ctx() const { return ctx_; }

  std::atomic<int> users{0};     // QPs using it: destroy fails with EBUSY
  AsyncEventCount async_events;  // its IBV_EVENT_CQ_ERR (core/async_events.h)

  // --- extended CQ (core/verbs_cq_ex.cpp)
  // Record the time of each completion as it is queued: CLOCK_MONOTONIC
  // (completion timestamps) and/or CLOCK_REALTIME (wallclock), in ns.
  void EnableTimestamps(bool monotonic, bool wallclock);
  void set_ignore_overrun(bool v) { ignore_overrun_ = v; }
  // The oldest completion with its timestamps; false if the CQ is empty.
  bool PopOne(ibv_wc* wc, uint64_t* ts, uint64_t* wallclock_ns);
  // Changes the capacity keeping queued completions; EINVAL if `cqe` is
  // smaller than what is queued.
  int Resize(int cqe);
  // Drops the queued completions of QP `qp_num` (it was reset: as mlx4,
  // mlx5 and hns clean the CQ then), keeping the others in order.
  void RemoveQpCompletions(uint32_t qp_num);

  // ibv_start_poll .. ibv_end_poll: the completion being read and the
  // session lock that keeps other pollers of the extended API out.
  SpinLock poll_session;
  ibv_wc current{};
  uint64_t current_ts = 0;
  uint64_t current_wallclock = 0;

 private:
  void NotifyLocked();
  // The rare parts of Emplace, out of line (lock_ held but by LockSlow):
  // inline they would cost the common case its registers.
  [[gnu::noinline]] void LockSlow() { lock_.lock(); }
  template <typename Fill>
  [[gnu::noinline]] void OverrunWith(Fill& fill) {
    ibv_wc lost;
    fill(lost);
    Overrun(lost);
  }
  void Overrun(const ibv_wc& lost);
  void Stamp(uint32_t slot);
  void NotifyIfArmed(bool solicited);
  // Inline: its one caller (ibv_poll_cq's full path) is a call already.
  int PollSome(int max, ibv_wc* out) {
    std::lock_guard<SpinLock> lock(lock_);
    int n = 0;
    uint32_t count = count_;
    while (n < max && count > 0) {
      out[n++] = entries_[head_];
      head_ = Wrap(head_ + 1);
      --count;
    }
    SetCount(count);
    return n;
  }
  Context* ctx_;
  CompChannel* channel_;
  mutable SpinLock lock_;
  std::vector<ibv_wc> entries_;
  uint32_t cap_ = 0;   // entries_.size(), kept apart: size() costs a division by 48
  uint32_t head_ = 0;  // next to poll
  // Valid entries. Changed only under lock_; read without it (LooksEmpty) by
  // the polling fast path, hence the atomic accesses.
  uint32_t count_ = 0;
  void SetCount(uint32_t n) { __atomic_store_n(&count_, n, __ATOMIC_RELAXED); }
  // An index below 2 * capacity brought into range: a compare, not the
  // division of `%` (tens of cycles on every push and poll).
  uint32_t Wrap(uint32_t i) const { return i >= cap_ ? i - cap_ : i; }
  enum class Arm : uint8_t { kNone, kAny, kSolicited } armed_ = Arm::kNone;
  bool overrun_ = false;
  bool ignore_overrun_ = false;
  bool stamped_ = false;        // ts_ or wall_ in use
  std::vector<uint64_t> ts_;    // parallel to entries_ when timestamps are on
  std::vector<uint64_t> wall_;  // same, wallclock
};
static_assert(offsetof(Cq, cqx) == 0);

}  // namespace softrdma
