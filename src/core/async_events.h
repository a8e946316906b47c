// The queue behind a context's async_fd: what ibv_get_async_event hands out
// and what ibv_destroy_qp/cq/srq wait for.
//
// The verbs contract (man ibv_get_async_event, ibv_destroy_qp): every event
// read must be acknowledged with ibv_ack_async_event; destroying a QP, CQ or
// SRQ waits until each event of it already read has been acknowledged, and
// no event of the object is read after its destroy returned (the kernel
// drops the ones not read yet). Applications rely on it: UCX looks an event
// up by element.qp->qp_num, so an event read after the QP was freed reads
// freed memory, and may find a later QP that got the same number.
//
// Events wait in a queue under a mutex; a pipe carries one byte per queued
// event so that async_fd polls readable exactly when an event waits, and a
// blocking read of it sleeps until one comes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#include <infiniband/verbs.h>

namespace softrdma {

// Per QP, CQ and SRQ: how many of its events were read and acknowledged.
// Changed only under the owning context's AsyncEventQueue mutex.
struct AsyncEventCount {
  uint64_t reported = 0;   // handed out by ibv_get_async_event
  uint64_t completed = 0;  // acknowledged by ibv_ack_async_event
};

class AsyncEventQueue {
 public:
  AsyncEventQueue() = default;
  AsyncEventQueue(const AsyncEventQueue&) = delete;
  AsyncEventQueue& operator=(const AsyncEventQueue&) = delete;
  ~AsyncEventQueue();

  // Makes the pipe; *read_fd becomes the context's async_fd (closed by its
  // owner). 0 or an errno.
  int Open(int* read_fd);

  // Queues an event of `object` (counted in *count; null for port and device
  // events). Never blocks: the transport raises events from its threads.
  void Post(ibv_event_type type, void* object, AsyncEventCount* count);

  // The oldest event, read through the application's `read_fd` (its
  // blocking mode decides whether this waits). 0, or -1 with errno.
  int Get(int read_fd, ibv_async_event* event);

  // An event handed out by Get was acknowledged.
  void Ack(AsyncEventCount* count);

  // The object counted in *count is being destroyed: its events not read yet
  // are dropped, and this waits until those already read are acknowledged
  // (forever if the application never acknowledges them, as with rdma-core).
  // The caller makes sure no new event of it is posted (the object is out of
  // the transport).
  void Retire(AsyncEventCount* count);

 private:
  struct Pending {
    ibv_event_type type;
    void* object;
    AsyncEventCount* count;
  };

  std::mutex mutex_;
  std::condition_variable acked_;
  std::deque<Pending> pending_;
  int write_fd_ = -1;
  // The read end opened a second time, non-blocking (a file description of
  // its own): Retire takes the bytes of the events it drops through it.
  // -1 without /proc: those bytes stay and Get skips them.
  int drain_fd_ = -1;
};

}  // namespace softrdma
