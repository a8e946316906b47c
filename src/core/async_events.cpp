#include "core/async_events.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "util/log.h"

namespace softrdma {

AsyncEventQueue::~AsyncEventQueue() {
  if (write_fd_ >= 0) close(write_fd_);
  if (drain_fd_ >= 0) close(drain_fd_);
}

int AsyncEventQueue::Open(int* read_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno;
  // The transport never waits for the application; the read end keeps the
  // blocking mode the application gives it (UCX sets O_NONBLOCK).
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  write_fd_ = fds[1];
  // Opening a pipe through /proc gives a new file description of it, whose
  // O_NONBLOCK is its own.
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  drain_fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  *read_fd = fds[0];
  return 0;
}

void AsyncEventQueue::Post(ibv_event_type type, void* object, AsyncEventCount* count) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The byte first: a reader that takes it waits on the mutex for the event.
  const char ticket = 0;
  if (write(write_fd_, &ticket, 1) != 1) {
    SOFTRDMA_LOG(kWarn, "async event %d dropped: queue full", type);
    return;
  }
  pending_.push_back({type, object, count});
}

namespace {

void Fill(ibv_event_type type, void* object, ibv_async_event* event) {
  memset(event, 0, sizeof *event);
  event->event_type = type;
  switch (type) {
    case IBV_EVENT_CQ_ERR:
      event->element.cq = static_cast<ibv_cq*>(object);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      event->element.srq = static_cast<ibv_srq*>(object);
      break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
      event->element.port_num = static_cast<int>(reinterpret_cast<intptr_t>(object));
      break;
    case IBV_EVENT_DEVICE_FATAL:
      break;
    default:
      event->element.qp = static_cast<ibv_qp*>(object);
      break;
  }
}

}  // namespace

int AsyncEventQueue::Get(int read_fd, ibv_async_event* event) {
  for (;;) {
    char ticket;
    const ssize_t n = read(read_fd, &ticket, 1);
    if (n != 1) {
      if (n >= 0) errno = EIO;
      return -1;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // Empty: the byte was one of an event Retire dropped while this read
    // (Retire then found one byte fewer to take); wait for the next.
    if (pending_.empty()) continue;
    const Pending p = pending_.front();
    pending_.pop_front();
    if (p.count) ++p.count->reported;
    Fill(p.type, p.object, event);
    return 0;
  }
}

void AsyncEventQueue::Ack(AsyncEventCount* count) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++count->completed;
  acked_.notify_all();
}

void AsyncEventQueue::Retire(AsyncEventCount* count) {
  std::unique_lock<std::mutex> lock(mutex_);
  size_t dropped = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->count == count) {
      it = pending_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  // Their bytes go too, so that async_fd does not poll readable for events
  // that are gone. A byte already taken by a reader is not there: that
  // reader finds the queue one shorter and reads again.
  char ticket;
  for (; dropped > 0 && drain_fd_ >= 0; --dropped)
    if (read(drain_fd_, &ticket, 1) != 1) break;
  acked_.wait(lock, [count] { return count->completed == count->reported; });
}

}  // namespace softrdma
