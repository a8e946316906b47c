#include "cm/event_channel.h"

#include "cm/cm_id.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace softrdma::cm {

ChannelPrivate* CreateChannel() {
  // A semaphore eventfd: each read takes one token, the fd is readable while
  // any is left. Unlike a pipe it has no end of file, so a thread blocked in
  // rdma_get_cm_event while another destroys the channel stays blocked (as
  // with the kernel's rdma_cm fd) instead of failing.
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* channel = new ChannelPrivate;
  channel->channel.fd = fd;
  return channel;
}

void DestroyChannel(ChannelPrivate* channel) {
  if (channel == nullptr) return;
  close(channel->channel.fd);
  for (EventPrivate* event : channel->queue) delete event;
  delete channel;
}

void PushEvent(ChannelPrivate* channel, EventPrivate* event) {
  {
    std::lock_guard<std::mutex> lock(channel->mu);
    channel->queue.push_back(event);
  }
  uint64_t token = 1;
  ssize_t ignored = write(channel->channel.fd, &token, sizeof(token));
  (void)ignored;
}

EventPrivate* PopEvent(ChannelPrivate* channel) {
  // Tokens and events are one to one, and an event is queued before its
  // token is written, so a token read always finds an event.
  for (;;) {
    uint64_t token;
    ssize_t n = read(channel->channel.fd, &token, sizeof(token));
    if (n < 0) return nullptr;  // errno from read: EAGAIN, EINTR, EBADF
    std::lock_guard<std::mutex> lock(channel->mu);
    if (channel->queue.empty()) continue;
    EventPrivate* event = channel->queue.front();
    channel->queue.pop_front();
    if (event->owner != nullptr) {
      // Counted while the channel's mutex is held, so an rdma_destroy_id
      // that disowned this channel's events before either sees the count or
      // has cleared the owner.
      std::lock_guard<std::mutex> count(UnackedMutex());
      event->owner->unacked_events++;
      return event;
    }
    delete event;  // its id was destroyed before the event was read
  }
}

std::mutex& UnackedMutex() {
  static std::mutex mu;
  return mu;
}

std::condition_variable& UnackedChanged() {
  static std::condition_variable cv;
  return cv;
}

void AckEvent(EventPrivate* event) {
  if (event->owner != nullptr) {
    std::lock_guard<std::mutex> lock(UnackedMutex());
    event->owner->unacked_events--;
    UnackedChanged().notify_all();
  }
  delete event;
}

void WaitForAcks(IdPrivate* owner) {
  std::unique_lock<std::mutex> lock(UnackedMutex());
  UnackedChanged().wait(lock, [owner] { return owner->unacked_events <= 0; });
}

void DisownEvents(ChannelPrivate* channel, IdPrivate* owner) {
  std::lock_guard<std::mutex> lock(channel->mu);
  for (EventPrivate* event : channel->queue) {
    if (event->owner == owner) event->owner = nullptr;
  }
}

}  // namespace softrdma::cm
