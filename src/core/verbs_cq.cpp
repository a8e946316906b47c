// Completion queues and completion channels.
#include <cerrno>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/verbs.h"
#include "transport/engine.h"

namespace softrdma::verbs {

namespace {
bool ValidContext(ibv_context* c) {
  return c && c->device == Device::Get().verbs_device();
}

int ReturnEvent(Cq* which, ibv_cq** cq, void** cq_context) {
  *cq = which->verbs();
  *cq_context = which->verbs()->cq_context;
  return 0;
}
}  // namespace

ibv_comp_channel* CreateCompChannel(ibv_context* context) {
  if (!ValidContext(context)) {
    errno = EINVAL;
    return nullptr;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  // The write end never blocks the transport; the read end keeps whatever
  // blocking mode the application gives it (UCX sets O_NONBLOCK).
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  auto* ch = new (std::nothrow) CompChannel();
  if (!ch) {
    close(fds[0]);
    close(fds[1]);
    errno = ENOMEM;
    return nullptr;
  }
  ch->ch.context = context;
  ch->ch.fd = fds[0];
  ch->ch.refcnt = 0;
  ch->write_fd = fds[1];
  // Opening a pipe through /proc gives a new file description of it, whose
  // O_NONBLOCK is its own. Without /proc, events are read as before.
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  ch->nonblocking_fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  return &ch->ch;
}

int DestroyCompChannel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  CompChannel* ch = CompChannel::From(channel);
  if (ch->users.load() != 0) return EBUSY;
  close(ch->ch.fd);
  close(ch->write_fd);
  if (ch->nonblocking_fd >= 0) close(ch->nonblocking_fd);
  delete ch;
  return 0;
}

ibv_cq* CreateCq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                 int comp_vector) {
  if (!ValidContext(context) || cqe < 1 || cqe > limits::kMaxCqe || comp_vector < 0 ||
      comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  if (!Engine::Get(nullptr)) {
    errno = EIO;
    return nullptr;
  }
  CompChannel* ch = channel ? CompChannel::From(channel) : nullptr;
  auto* cq = new (std::nothrow) Cq(Context::From(context), cqe, cq_context, ch);
  if (!cq) {
    errno = ENOMEM;
    return nullptr;
  }
  if (ch) ch->users.fetch_add(1);
  return cq->verbs();
}

int DestroyCq(ibv_cq* ibcq) {
  if (!ibcq) return EINVAL;
  Cq* cq = Cq::From(ibcq);
  if (cq->users.load() != 0) return EBUSY;
  // No QP uses it, so nothing raises its CQ_ERR any more (core/async_events.h).
  cq->ctx()->async_events.Retire(&cq->async_events);
  if (cq->channel()) cq->channel()->users.fetch_sub(1);
  delete cq;
  return 0;
}

namespace {

[[gnu::noinline]] int PollCqFully(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  if (num_entries < 0 || (num_entries > 0 && !wc)) return -1;
  // Polling is what drives progress for a busy application: look at the
  // inbound ring first, then hand out what is there.
  Engine* engine = Engine::Get(nullptr);
  if (engine) engine->Progress();
  const int n = Cq::From(ibcq)->Poll(num_entries, wc);
  if (n == 0 && engine) engine->PollFoundNothing();
  return n;
}

}  // namespace

int PollCq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  // What a busy-polling application mostly finds: nothing arrived, nothing
  // queued. Answered by a few loads in a leaf function (no call, so no
  // registers to save); everything else takes the full path.
  Engine* engine = Engine::Current();
  if (engine && num_entries > 0 && wc && engine->NothingToDrive() && Cq::From(ibcq)->LooksEmpty()) {
    engine->CountPoll();
    return 0;
  }
  return PollCqFully(ibcq, num_entries, wc);
}

int ReqNotifyCq(ibv_cq* ibcq, int solicited_only) {
  Cq::From(ibcq)->Arm(solicited_only != 0);
  // The application may now block on the channel instead of polling: make
  // sure the progress thread keeps delivering.
  if (Engine* engine = Engine::Get(nullptr)) engine->ApplicationMayBlock();
  return 0;
}

int GetCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  Cq* which = nullptr;
  CompChannel* ch = CompChannel::From(channel);
  Engine* engine = Engine::Current();
  if (ch->nonblocking_fd >= 0 && engine) {
    // An event already there is read as before; with none, a blocking
    // channel waits on the inbound ring itself (one wake-up per message).
    const ssize_t n = read(ch->nonblocking_fd, &which, sizeof which);
    if (n == sizeof which) return ReturnEvent(which, cq, cq_context);
    if (n < 0 && errno != EAGAIN) return -1;
    const int flags = fcntl(channel->fd, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK)) {
      errno = EAGAIN;  // the application's non-blocking channel: no event
      return -1;
    }
    const int got = engine->WaitForChannelEvent(ch, ch->nonblocking_fd, &which, sizeof which);
    if (got > 0) return ReturnEvent(which, cq, cq_context);
    if (got < 0) return -1;
    // Another thread of the process waits on the ring: block on the pipe.
  }
  ssize_t n = read(channel->fd, &which, sizeof which);
  if (n != sizeof which) {
    if (n >= 0) errno = EIO;
    return -1;  // EAGAIN on a non-blocking channel with no event
  }
  return ReturnEvent(which, cq, cq_context);
}

void AckCqEvents(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // namespace softrdma::verbs
