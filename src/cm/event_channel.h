// rdma_cm event channels: a real pollable fd (a semaphore eventfd, one
// token per queued event) and the queue of events behind it. Blocking
// and non-blocking reads, poll and epoll behave as on the kernel's rdma_cm
// fd: readable exactly while an event is queued; EAGAIN when empty and
// O_NONBLOCK is set.
#pragma once

#include <rdma/rdma_cma.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace softrdma::cm {

struct IdPrivate;

// An event as handed to the application: the public struct first (the
// application's pointer converts back with a cast), and room for the largest
// private data any CM message carries.
struct EventPrivate {
  rdma_cm_event event{};
  uint8_t private_data[256]{};
  // The id the event was queued for; cleared when that id is destroyed
  // before the event was read, so the event is then skipped.
  IdPrivate* owner = nullptr;
  // MULTICAST_JOIN: the membership (Membership::handle) it reports.
  uint64_t membership = 0;
};

struct ChannelPrivate {
  rdma_event_channel channel{};  // must stay first
  std::mutex mu;
  std::deque<EventPrivate*> queue;
  bool sync_owned = false;  // the private channel of a synchronous id

  static ChannelPrivate* Of(rdma_event_channel* c) { return reinterpret_cast<ChannelPrivate*>(c); }
};

ChannelPrivate* CreateChannel();  // nullptr + errno on failure
void DestroyChannel(ChannelPrivate* channel);

// Queues an event and makes the fd readable. Takes ownership.
void PushEvent(ChannelPrivate* channel, EventPrivate* event);

// Waits (as the fd's O_NONBLOCK flag says) for one event and takes it off the
// queue. Returns nullptr with errno (EAGAIN, EINTR, ...) when none.
EventPrivate* PopEvent(ChannelPrivate* channel);

// Frees an event the application acknowledged (rdma_ack_cm_event).
void AckEvent(EventPrivate* event);
// Blocks until every event of `owner` handed out has been acknowledged.
void WaitForAcks(IdPrivate* owner);
std::mutex& UnackedMutex();
std::condition_variable& UnackedChanged();

// Forgets `owner` in every queued event (the id is being destroyed).
void DisownEvents(ChannelPrivate* channel, IdPrivate* owner);

}  // namespace softrdma::cm
