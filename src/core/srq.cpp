#include "core/srq.h"

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "core/limits.h"

namespace softrdma {

Srq::Srq(Context* ctx, Pd* pd, uint32_t max_wr, uint32_t max_sge, uint32_t srq_num)
    : srq{}, ctx_(ctx), pd_(pd), max_sge_(max_sge ? max_sge : 1), srq_num_(srq_num) {
  q_.Init(max_wr, max_sge_);
}

int Srq::Post(ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  std::lock_guard<SpinLock> lock(lock_);
  for (; wr; wr = wr->next) {
    int rc = 0;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge_ ||
        (wr->num_sge > 0 && !wr->sg_list))
      rc = EINVAL;
    else if (q_.full())
      rc = ENOMEM;
    if (rc) {
      *bad_wr = wr;
      return rc;
    }
    RecvWqe& w = q_.at(q_.head);
    w.wr_id = wr->wr_id;
    w.num_sge = static_cast<uint32_t>(wr->num_sge);
    std::copy_n(wr->sg_list, wr->num_sge, q_.sge_of(q_.head));
    ++q_.head;
  }
  return 0;
}

bool Srq::Take(RecvWqe* wqe, ibv_sge* sges) {
  bool fire = false;
  {
    std::lock_guard<SpinLock> lock(lock_);
    if (q_.size() == 0) return false;
    *wqe = q_.at(q_.tail);
    std::copy_n(q_.sge_of(q_.tail), wqe->num_sge, sges);
    ++q_.tail;
    // The limit is a one-shot alarm: the application re-arms it with
    // ibv_modify_srq after refilling (IBA 10.2.9.4; rxe does the same).
    if (limit_ && q_.size() < limit_) {
      limit_ = 0;
      fire = true;
    }
  }
  if (fire) PostAsyncEvent(ctx_, IBV_EVENT_SRQ_LIMIT_REACHED, &srq);
  return true;
}

bool Srq::Empty() const {
  std::lock_guard<SpinLock> lock(lock_);
  return q_.size() == 0;
}

int Srq::Modify(const ibv_srq_attr& attr, int mask) {
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  std::lock_guard<SpinLock> lock(lock_);
  const uint32_t new_limit = (mask & IBV_SRQ_LIMIT) ? attr.srq_limit : limit_;
  if (mask & IBV_SRQ_MAX_WR) {
    // Resizing keeps the posted WQEs, so it cannot go below what is queued
    // (nor below an armed limit, as rxe checks).
    if (attr.max_wr == 0 || attr.max_wr > static_cast<uint32_t>(limits::kMaxSrqWr) ||
        attr.max_wr < q_.size() || attr.max_wr < new_limit)
      return EINVAL;
  }
  const uint32_t cap = (mask & IBV_SRQ_MAX_WR) ? attr.max_wr : q_.capacity();
  if (new_limit > cap) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) {
    WorkQueue<RecvWqe> bigger;
    bigger.Init(attr.max_wr, max_sge_);
    for (uint32_t i = q_.tail; i != q_.head; ++i, ++bigger.head) {
      bigger.at(bigger.head) = q_.at(i);
      std::copy_n(q_.sge_of(i), q_.at(i).num_sge, bigger.sge_of(bigger.head));
    }
    q_ = std::move(bigger);
  }
  limit_ = new_limit;
  return 0;
}

void Srq::Query(ibv_srq_attr* attr) const {
  std::lock_guard<SpinLock> lock(lock_);
  attr->max_wr = q_.capacity();
  attr->max_sge = max_sge_;
  attr->srq_limit = limit_;
}

}  // namespace softrdma
