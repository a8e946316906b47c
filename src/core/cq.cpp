#include "core/cq.h"

#include <cerrno>
#include <mutex>

#include <unistd.h>

#include "core/qp.h"
#include "transport/engine.h"
#include "util/clock.h"
#include "util/log.h"

namespace softrdma {

Cq::Cq(Context* ctx, int cqe, void* cq_context, CompChannel* channel)
    : ctx_(ctx),
      channel_(channel),
      entries_(static_cast<size_t>(cqe)),
      cap_(static_cast<uint32_t>(cqe)) {
  ibv_cq* c = verbs();
  c->context = ctx->verbs();
  c->channel = channel ? &channel->ch : nullptr;
  c->cq_context = cq_context;
  c->cqe = cqe;
  pthread_mutex_init(&c->mutex, nullptr);
  pthread_cond_init(&c->cond, nullptr);
}

Cq::~Cq() {
  pthread_mutex_destroy(&verbs()->mutex);
  pthread_cond_destroy(&verbs()->cond);
}

int Cq::depth() const {
  std::lock_guard<SpinLock> lock(lock_);
  return static_cast<int>(count_);
}

void Cq::Overrun(const ibv_wc& lost) {
  // A real CQ overruns: the completion is lost and the CQ reports an
  // asynchronous error, once. The QP whose completion was lost cannot go on
  // either (a "local work queue catastrophic error"): it enters ERR with
  // IBV_EVENT_QP_FATAL, outside this CQ's lock (its flush completions come
  // back here).
  if (ignore_overrun_) return;
  if (Engine* engine = Engine::Current()) {
    if (Qp* qp = engine->LocalQp(lost.qp_num)) {
      qp->cq_overrun.store(true, std::memory_order_relaxed);
      engine->NeedService(qp);
      engine->WatchTimers();  // the progress thread serves it if nobody polls
    }
  }
  if (overrun_) return;
  overrun_ = true;
  SOFTRDMA_LOG(kWarn, "CQ %p overrun: completion for wr_id %llu lost", (void*)this,
               (unsigned long long)lost.wr_id);
  PostAsyncEvent(ctx_, IBV_EVENT_CQ_ERR, verbs());
}

void Cq::Stamp(uint32_t slot) {
  // Taken under the lock, so the timestamps of one CQ never go backwards.
  if (!ts_.empty()) ts_[slot] = NowNs();
  if (!wall_.empty()) {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    wall_[slot] =
        static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
  }
}

void Cq::NotifyIfArmed(bool solicited) {
  if (armed_ == Arm::kAny || (armed_ == Arm::kSolicited && solicited)) NotifyLocked();
}

void Cq::NotifyLocked() {
  armed_ = Arm::kNone;
  if (!channel_) return;
  Cq* self = this;
  // The pipe holds thousands of tokens and each arm produces at most one, so
  // a full pipe means the application stopped reading events altogether.
  if (write(channel_->write_fd, &self, sizeof self) != sizeof self)
    SOFTRDMA_LOG(kWarn, "completion channel full, event dropped");
  else if (Engine* engine = Engine::Current())
    engine->TokenWritten(channel_);  // its waiter may wait on the ring, not the pipe
}

int Cq::Arm(bool solicited_only) {
  std::lock_guard<SpinLock> lock(lock_);
  // Arming is a request for the *next* completion; completions already in the
  // queue do not fire it (applications poll after arming to close the race).
  if (armed_ != Arm::kAny) armed_ = solicited_only ? Arm::kSolicited : Arm::kAny;
  return 0;
}

void Cq::EnableTimestamps(bool monotonic, bool wallclock) {
  std::lock_guard<SpinLock> lock(lock_);
  if (monotonic) ts_.assign(entries_.size(), 0);
  if (wallclock) wall_.assign(entries_.size(), 0);
  stamped_ = !ts_.empty() || !wall_.empty();
}

bool Cq::PopOne(ibv_wc* wc, uint64_t* ts, uint64_t* wallclock_ns) {
  if (LooksEmpty()) return false;
  std::lock_guard<SpinLock> lock(lock_);
  if (count_ == 0) return false;
  *wc = entries_[head_];
  *ts = ts_.empty() ? 0 : ts_[head_];
  *wallclock_ns = wall_.empty() ? 0 : wall_[head_];
  head_ = Wrap(head_ + 1);
  SetCount(count_ - 1);
  return true;
}

int Cq::Resize(int cqe) {
  const size_t n = static_cast<size_t>(cqe);
  std::vector<ibv_wc> entries(n);
  std::vector<uint64_t> ts(ts_.empty() ? 0 : n), wall(wall_.empty() ? 0 : n);
  std::lock_guard<SpinLock> lock(lock_);
  if (n < count_) return EINVAL;
  for (uint32_t i = 0; i < count_; ++i) {
    const size_t from = (head_ + i) % entries_.size();
    entries[i] = entries_[from];
    if (!ts.empty()) ts[i] = ts_[from];
    if (!wall.empty()) wall[i] = wall_[from];
  }
  entries_.swap(entries);
  ts_.swap(ts);
  wall_.swap(wall);
  cap_ = static_cast<uint32_t>(n);
  head_ = 0;
  overrun_ = false;  // a bigger queue: report the next overrun again
  verbs()->cqe = cqe;
  return 0;
}

void Cq::RemoveQpCompletions(uint32_t qp_num) {
  std::lock_guard<SpinLock> lock(lock_);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count_; ++i) {
    const uint32_t from = Wrap(head_ + i);
    if (entries_[from].qp_num == qp_num) continue;
    const uint32_t to = Wrap(head_ + kept++);
    if (to == from) continue;
    entries_[to] = entries_[from];
    if (!ts_.empty()) ts_[to] = ts_[from];
    if (!wall_.empty()) wall_[to] = wall_[from];
  }
  SetCount(kept);
}

}  // namespace softrdma
