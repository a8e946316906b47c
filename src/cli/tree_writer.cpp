#include "cli/tree_writer.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace softrdma::cli {

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      close(fd);
      errno = err;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return close(fd) == 0;
}

bool Create(const std::string& path, const TreeEntry& entry) {
  switch (entry.kind) {
    case TreeEntry::Kind::kDirectory:
      // The umask must not narrow what readers of sysfs expect.
      return mkdir(path.c_str(), 0755) == 0 && chmod(path.c_str(), 0755) == 0;
    case TreeEntry::Kind::kFile:
      return WriteFile(path, entry.content) && chmod(path.c_str(), 0444) == 0;
    case TreeEntry::Kind::kSymlink:
      return symlink(entry.content.c_str(), path.c_str()) == 0;
  }
  errno = EINVAL;
  return false;
}

}  // namespace

bool WriteTree(const std::string& root, const std::vector<TreeEntry>& entries, std::string* error) {
  for (const TreeEntry& entry : entries) {
    const std::string path = root + "/" + entry.path;
    if (!Create(path, entry)) {
      *error = path + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace softrdma::cli
