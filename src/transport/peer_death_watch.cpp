#include "transport/peer_death_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "transport/engine.h"

namespace softrdma {

namespace {

int PidfdOpen(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

PeerDeathWatch::~PeerDeathWatch() {
  Stop();
}

bool PeerDeathWatch::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (epoll_fd_ < 0 || stop_fd_ < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = stop_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) != 0) return false;
  thread_ = std::thread([this] { Run(); });
  return true;
}

void PeerDeathWatch::Watch(const std::shared_ptr<PeerLink>& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoll_fd_ < 0 && !Start()) return;  // no watch: the ring paths' timers still apply
  int fd = PidfdOpen(peer->pid);
  if (fd < 0) {
    if (errno == ESRCH) peer->gone.store(true, std::memory_order_relaxed);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    return;
  }
  by_fd_[fd] = peer;
}

void PeerDeathWatch::Run() {
  epoll_event events[16];
  for (;;) {
    int n = epoll_wait(epoll_fd_, events, 16, -1);
    if (n < 0 && errno != EINTR) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop_fd_) return;
      auto it = by_fd_.find(fd);
      if (it == by_fd_.end()) continue;
      if (std::shared_ptr<PeerLink> peer = it->second.lock())
        peer->gone.store(true, std::memory_order_release);
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
      by_fd_.erase(it);
    }
  }
}

void PeerDeathWatch::Stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [fd, peer] : by_fd_) close(fd);
  by_fd_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  epoll_fd_ = stop_fd_ = -1;
}

}  // namespace softrdma
