// Learns that a peer process died the moment the kernel knows it: one pidfd
// per peer process in an epoll set, and a thread that sleeps in epoll_wait
// until one of them becomes readable (the process exited, however it died).
// It then marks the peer's PeerLink gone. The data path reads that flag
// with one relaxed load; nothing polls /proc or sends signals on it.
//
// Why a thread of its own: the progress thread sleeps on the inbound ring's
// futex, which a pidfd cannot wake. This one wakes only when a peer dies
// (or at shutdown), so it never competes with a polling application.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace softrdma {

struct PeerLink;

class PeerDeathWatch {
 public:
  PeerDeathWatch() = default;
  PeerDeathWatch(const PeerDeathWatch&) = delete;
  PeerDeathWatch& operator=(const PeerDeathWatch&) = delete;
  ~PeerDeathWatch();

  // Watches `peer`'s process (peer->pid). A process that is gone already
  // is marked at once. The thread starts with the first watch.
  void Watch(const std::shared_ptr<PeerLink>& peer);
  // Stops the thread and closes every pidfd.
  void Stop();

 private:
  void Run();
  bool Start();

  std::mutex mu_;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: wakes the thread to stop
  std::thread thread_;
  std::map<int, std::weak_ptr<PeerLink>> by_fd_;  // pidfd -> the peer it watches
};

}  // namespace softrdma
