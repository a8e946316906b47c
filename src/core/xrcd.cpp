// ibv_open_xrcd / ibv_close_xrcd: see xrcd.h for how domains are identified
// and how their existence is known host-wide.
#include "core/xrcd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "core/objects.h"
#include "core/verbs.h"

namespace softrdma::verbs {

namespace {

// The byte every opener read-locks: the largest offset a lock can name, so
// it never overlaps a range an application locks for its own purposes.
constexpr off_t kLockOffset = LLONG_MAX - 1;

std::atomic<uint64_t> g_next_private{1};

// Domain tokens (Xrcd::token). A file domain's token is a hash of its
// device and inode with the top bit set, so that every process derives the
// same one (ibv_open_qp checks it against another process's target QP);
// a private domain's is a counter below that bit. Within one process a
// hash already taken by another file is probed on, so tokens stay exact
// here; across processes two files whose hashes collide (about 1 in 2^31
// per pair) would look alike.
std::mutex g_token_mutex;
uint32_t g_next_private_token = 1;
constexpr uint32_t kFileTokenBit = 0x80000000u;

uint32_t HashFile(dev_t dev, ino_t ino) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the two numbers
  for (uint64_t v : {static_cast<uint64_t>(dev), static_cast<uint64_t>(ino)}) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return static_cast<uint32_t>(h ^ (h >> 32));
}

uint32_t FileDomainToken(dev_t dev, ino_t ino) {
  static auto* tokens = new std::map<std::pair<dev_t, ino_t>, uint32_t>();  // used at exit
  static auto* taken = new std::map<uint32_t, std::pair<dev_t, ino_t>>();
  std::lock_guard<std::mutex> lock(g_token_mutex);
  if (auto it = tokens->find({dev, ino}); it != tokens->end()) return it->second;
  uint32_t t = HashFile(dev, ino) | kFileTokenBit;
  while (taken->count(t)) t = (t + 1) | kFileTokenBit;
  tokens->emplace(std::pair{dev, ino}, t);
  taken->emplace(t, std::pair{dev, ino});
  return t;
}

uint32_t PrivateDomainToken() {
  std::lock_guard<std::mutex> lock(g_token_mutex);
  return g_next_private_token++ & ~kFileTokenBit;
}

flock LockByte(short type) {
  flock l{};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = kLockOffset;
  l.l_len = 1;
  return l;
}

// Opens a description of its own for the file behind `fd` (the application
// may close its fd right after ibv_open_xrcd) and takes the domain's lock.
// Returns the fd holding the lock, or -1 with errno set.
int JoinFileDomain(int fd) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int own = open(path, O_RDONLY | O_CLOEXEC);
  if (own < 0) return -1;
  flock hold = LockByte(F_RDLCK);
  if (fcntl(own, F_OFD_SETLK, &hold) != 0) {
    int e = errno;
    close(own);
    errno = e;
    return -1;
  }
  return own;
}

// Whether some opener (this process included) holds the domain's lock.
bool DomainExists(int fd, bool* exists) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int own = open(path, O_RDONLY | O_CLOEXEC);
  if (own < 0) return false;
  flock probe = LockByte(F_WRLCK);
  bool ok = fcntl(own, F_OFD_GETLK, &probe) == 0;
  close(own);
  *exists = ok && probe.l_type != F_UNLCK;
  return ok;
}

}  // namespace

ibv_xrcd* OpenXrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (!context || !attr) {
    errno = EINVAL;
    return nullptr;
  }
  // As the kernel's open_xrcd: unknown bits are refused, fd and oflags are
  // both required.
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) || (attr->oflags & ~(O_CREAT | O_EXCL))) {
    errno = EINVAL;
    return nullptr;
  }
  auto* x = new (std::nothrow) Xrcd();
  if (!x) {
    errno = ENOMEM;
    return nullptr;
  }
  x->xrcd.context = context;
  if (attr->fd == -1) {
    // A private domain is new by definition, so it needs O_CREAT (the
    // kernel's rule too).
    if (!(attr->oflags & O_CREAT)) {
      delete x;
      errno = EINVAL;
      return nullptr;
    }
    x->private_id = g_next_private.fetch_add(1);
    x->token = PrivateDomainToken();
    return &x->xrcd;
  }
  struct stat st {};
  bool exists = false;
  if (fstat(attr->fd, &st) != 0 || !DomainExists(attr->fd, &exists)) {
    delete x;
    errno = EBADF;
    return nullptr;
  }
  // ibv_open_xrcd(3): without O_CREAT the domain must exist; O_CREAT|O_EXCL
  // fails if it does. The kernel reports both as EINVAL. Two racing
  // O_EXCL creators can both succeed (a lock is no atomic test-and-set);
  // the domain they get is the same one.
  if ((!exists && !(attr->oflags & O_CREAT)) ||
      (exists && (attr->oflags & O_CREAT) && (attr->oflags & O_EXCL))) {
    delete x;
    errno = EINVAL;
    return nullptr;
  }
  x->lock_fd = JoinFileDomain(attr->fd);
  if (x->lock_fd < 0) {
    int e = errno;
    delete x;
    errno = e;
    return nullptr;
  }
  x->dev = st.st_dev;
  x->ino = st.st_ino;
  x->token = FileDomainToken(st.st_dev, st.st_ino);
  return &x->xrcd;
}

// Reached through the header inline without a NULL check of the op, so it
// must exist; a NULL xrcd is the caller's error.
int CloseXrcd(ibv_xrcd* xrcd) {
  if (!xrcd) return EINVAL;
  Xrcd* x = Xrcd::From(xrcd);
  if (x->users.load() != 0) return EBUSY;
  if (x->lock_fd >= 0) close(x->lock_fd);  // drops our share of the domain
  delete x;
  return 0;
}

}  // namespace softrdma::verbs
