// Helpers for tests with several processes: whole-message pipe I/O between
// parent and child, and a checksum to compare payloads across them.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace softrdma::test {

inline bool WriteAll(int fd, const void* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, static_cast<const char*>(p) + done, n - done);
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

inline bool ReadAll(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// A forked child with a pipe each way. The child runs `body(to_parent,
// from_parent)`, which must not return (it exits); the parent keeps `from_child`
// and `to_child`. pid < 0 if fork or pipe failed.
struct Child {
  pid_t pid = -1;
  int from_child = -1;
  int to_child = -1;
};

template <typename Body>
Child ForkChild(Body body) {
  Child c;
  int up[2], down[2];
  if (pipe(up) != 0) return c;
  if (pipe(down) != 0) {
    close(up[0]);
    close(up[1]);
    return c;
  }
  c.pid = fork();
  if (c.pid == 0) {
    close(up[0]);
    close(down[1]);
    body(up[1], down[0]);
    _exit(99);  // not reached: the body exits
  }
  close(up[1]);
  close(down[0]);
  c.from_child = up[0];
  c.to_child = down[1];
  return c;
}

// FNV-1a over the bytes.
inline uint64_t Checksum(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace softrdma::test
