#include "util/sysfs_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace softrdma {

std::string sysfs_root_from_env(const char* env_value) {
  if (env_value == nullptr || *env_value == '\0') return "/sys";
  std::string root(env_value);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

std::string join_path(const char* dir, const char* file) {
  std::string path(dir);
  if (path.empty() || path.back() != '/') path.push_back('/');
  path.append(file);
  return path;
}

namespace {

// read() until `len` bytes, EOF or an error; retries EINTR. Returns bytes read
// or -1.
ssize_t read_fully(int fd, char* buf, std::size_t len) noexcept {
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = ::read(fd, buf + done, len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

int read_small_file(const char* path, char* buf, std::size_t size) noexcept {
  if (path == nullptr || buf == nullptr || size == 0) {
    errno = EINVAL;
    return -1;
  }
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;

  // Read one byte more than fits so that a file longer than the buffer is
  // detected instead of being cut short; the extra byte goes to `probe`.
  ssize_t len = read_fully(fd, buf, size);
  char probe = 0;
  ssize_t extra = 0;
  if (len == static_cast<ssize_t>(size)) extra = read_fully(fd, &probe, 1);
  const int saved_errno = errno;
  ::close(fd);
  if (len < 0 || extra < 0) {
    errno = saved_errno;
    return -1;
  }
  if (extra > 0) {
    errno = EOVERFLOW;
    return -1;
  }

  std::size_t n = static_cast<std::size_t>(len);
  if (n > 0 && buf[n - 1] == '\n') --n;
  if (n >= size || n > static_cast<std::size_t>(INT_MAX)) {
    errno = EOVERFLOW;  // no room left for the terminator
    return -1;
  }
  buf[n] = '\0';
  return static_cast<int>(n);
}

}  // namespace softrdma
