#include "wire/shm/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace softrdma::shm {
namespace {

Status ErrnoStatus(int err, std::string_view what, std::string_view name) {
  std::string msg(what);
  msg += " ";
  msg += name;
  msg += ": ";
  msg += std::strerror(err);
  return Status::Error(err, std::move(msg));
}

// shm_open accepts more than this on Linux, but a second '/' or an empty name
// is non-portable and usually a bug in the caller, so refuse it early.
bool ValidName(std::string_view name) {
  return name.size() >= 2 && name.size() < 250 && name[0] == '/' &&
         name.find('/', 1) == std::string_view::npos;
}

}  // namespace

ShmRegion::~ShmRegion() {
  Reset();
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status ShmRegion::Map(int fd, std::string_view name, size_t bytes, ShmRegion* out) {
  // MAP_POPULATE: every page of a segment is touched sooner or later (the
  // ring's slots in order, lap after lap), and a first touch during traffic
  // is a page fault in the middle of a message (~1-3 us in a VM, plus
  // zeroing the page on the owner's side): one every 64 slots on each side
  // of each ring, for a whole lap (4 MiB), which is where a short ping-pong
  // run's 99th percentile came from. Mapping all pages now costs about a
  // millisecond per segment, once.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "mmap", name);
  out->Reset();
  out->name_ = std::string(name);
  out->data_ = p;
  out->size_ = bytes;
  return Status::Ok();
}

void ShmRegion::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  name_.clear();
}

Status ShmRegion::Create(std::string_view name, size_t bytes, ShmRegion* out, mode_t mode) {
  if (!ValidName(name)) return Status::Error(EINVAL, "invalid shm name");
  if (bytes == 0) return Status::Error(EINVAL, "zero-sized shm region");
  std::string n(name);
  int fd = shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, "shm_open", name);
  Status st;
  // fchmod: the umask must not widen or narrow what the caller asked for.
  // posix_fallocate: a tmpfs that is too small (containers default to 64 MiB)
  // must fail here with ENOSPC, not later with SIGBUS on first touch.
  if (fchmod(fd, mode) != 0) {
    st = ErrnoStatus(errno, "fchmod", name);
  } else if (int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    st = ErrnoStatus(err, "posix_fallocate", name);
  } else {
    st = Map(fd, name, bytes, out);
  }
  close(fd);
  if (!st.ok()) shm_unlink(n.c_str());
  return st;
}

Status ShmRegion::Open(std::string_view name, ShmRegion* out) {
  if (!ValidName(name)) return Status::Error(EINVAL, "invalid shm name");
  std::string n(name);
  int fd = shm_open(n.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "shm_open", name);
  struct stat sb;
  Status st;
  if (fstat(fd, &sb) != 0) {
    st = ErrnoStatus(errno, "fstat", name);
  } else if (sb.st_size <= 0) {
    st = Status::Error(EINVAL, "empty shm object " + n);
  } else {
    st = Map(fd, name, static_cast<size_t>(sb.st_size), out);
  }
  close(fd);
  return st;
}

Status ShmRegion::Unlink(std::string_view name) {
  if (!ValidName(name)) return Status::Error(EINVAL, "invalid shm name");
  std::string n(name);
  if (shm_unlink(n.c_str()) != 0) return ErrnoStatus(errno, "shm_unlink", name);
  return Status::Ok();
}

}  // namespace softrdma::shm
