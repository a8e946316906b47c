#include "core/context_file.h"

#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/seqlock.h"

namespace softrdma {

namespace {

constexpr uint64_t kMagic = 0x7478632d61647273ull;  // "srda-cxt" read as little-endian bytes
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4096;
// A record still odd after this many reads belongs to an owner that died
// while writing it: the importer treats it as absent instead of spinning.
constexpr int kReadAttempts = 1 << 16;

// Seqlock writes of one record: odd while changing.
template <typename Record, typename Fill>
void WriteRecord(Record& r, Fill fill) {
  const uint32_t s = r.seq.load(std::memory_order_relaxed);
  r.seq.store(s + 1, std::memory_order_release);
  fill(r);
  r.seq.store(s + 2, std::memory_order_release);
}

}  // namespace

size_t ContextFile::Bytes() {
  return kHeaderBytes + sizeof(SharedPdRecord) * kPdSlots + sizeof(SharedMrRecord) * kMrSlots;
}

ContextFile::~ContextFile() {
  if (base_) munmap(base_, Bytes());
}

int ContextFile::Create() {
  // Sparse: only the pages of records ever written take memory.
  int fd = memfd_create("softrdma-context", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(Bytes())) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  void* p = mmap(nullptr, Bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  struct stat st {};
  fstat(fd, &st);
  inode_ = st.st_ino;
  base_ = p;
  header_ = static_cast<ContextFileHeader*>(p);
  header_->version = kVersion;
  header_->pid = getpid();
  __atomic_store_n(&header_->magic, kMagic, __ATOMIC_RELEASE);
  pds_ = reinterpret_cast<SharedPdRecord*>(static_cast<char*>(p) + kHeaderBytes);
  mrs_ = reinterpret_cast<SharedMrRecord*>(pds_ + kPdSlots);
  return fd;
}

int ContextFile::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno;
  // Anything else (a uverbs device, a pipe, a file too short) is not ours.
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != Bytes()) return EINVAL;
  ContextFileHeader h{};
  if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return EINVAL;
  if (h.magic != kMagic || h.version != kVersion || h.pid <= 0) return EINVAL;
  // Only the owner writes: another process maps it read-only.
  const int prot = h.pid == getpid() ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = mmap(nullptr, Bytes(), prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno;
  inode_ = st.st_ino;
  base_ = p;
  header_ = static_cast<ContextFileHeader*>(p);
  pds_ = reinterpret_cast<SharedPdRecord*>(static_cast<char*>(p) + kHeaderBytes);
  mrs_ = reinterpret_cast<SharedMrRecord*>(pds_ + kPdSlots);
  return 0;
}

bool ContextFile::OwnedHere() const {
  // getpid, not a cached value: a forked child holds its parent's contexts
  // and must not write into the parent's file.
  return header_ && header_->pid == getpid();
}

void ContextFile::PublishPd(uint32_t handle, uint32_t pd_id) {
  if (handle >= kPdSlots || !OwnedHere()) return;
  WriteRecord(pds_[handle], [&](SharedPdRecord& r) {
    SeqlockStore(&r.pd_id, pd_id);
    SeqlockStore(&r.live, 1u);
  });
}

void ContextFile::WithdrawPd(uint32_t handle) {
  if (handle >= kPdSlots || !OwnedHere()) return;
  WriteRecord(pds_[handle], [](SharedPdRecord& r) { SeqlockStore(&r.live, 0u); });
}

void ContextFile::PublishMr(uint32_t handle, const MrRecordView& m) {
  if (handle >= kMrSlots || !OwnedHere()) return;
  WriteRecord(mrs_[handle], [&](SharedMrRecord& r) {
    SeqlockStore(&r.pd_handle, m.pd_handle);
    SeqlockStore(&r.lkey, m.lkey);
    SeqlockStore(&r.rkey, m.rkey);
    SeqlockStore(&r.access, m.access);
    SeqlockStore(&r.iova, m.iova);
    SeqlockStore(&r.length, m.length);
    SeqlockStore(&r.host_addr, m.host_addr);
    SeqlockStore(&r.extent_fd, m.extent_fd);
    SeqlockStore(&r.extent_inode, m.extent_inode);
    SeqlockStore(&r.extent_base, m.extent_base);
    SeqlockStore(&r.extent_length, m.extent_length);
    SeqlockStore(&r.live, 1u);
  });
}

void ContextFile::WithdrawMr(uint32_t handle) {
  if (handle >= kMrSlots || !OwnedHere()) return;
  WriteRecord(mrs_[handle], [](SharedMrRecord& r) { SeqlockStore(&r.live, 0u); });
}

bool ContextFile::ReadPd(uint32_t handle, uint32_t* pd_id) const {
  if (!header_ || handle >= kPdSlots) return false;
  const SharedPdRecord& r = pds_[handle];
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint32_t s = r.seq.load(std::memory_order_acquire);
    const uint32_t live = SeqlockLoad(&r.live);
    const uint32_t id = SeqlockLoad(&r.pd_id);
    if (s & 1 || r.seq.load(std::memory_order_acquire) != s) continue;
    if (!live) return false;
    *pd_id = id;
    return true;
  }
  return false;
}

bool ContextFile::ReadMr(uint32_t handle, MrRecordView* out) const {
  if (!header_ || handle >= kMrSlots) return false;
  const SharedMrRecord& r = mrs_[handle];
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint32_t s = r.seq.load(std::memory_order_acquire);
    const uint32_t live = SeqlockLoad(&r.live);
    MrRecordView v{};
    v.pd_handle = SeqlockLoad(&r.pd_handle);
    v.lkey = SeqlockLoad(&r.lkey);
    v.rkey = SeqlockLoad(&r.rkey);
    v.access = SeqlockLoad(&r.access);
    v.iova = SeqlockLoad(&r.iova);
    v.length = SeqlockLoad(&r.length);
    v.host_addr = SeqlockLoad(&r.host_addr);
    v.extent_fd = SeqlockLoad(&r.extent_fd);
    v.extent_inode = SeqlockLoad(&r.extent_inode);
    v.extent_base = SeqlockLoad(&r.extent_base);
    v.extent_length = SeqlockLoad(&r.extent_length);
    if (s & 1 || r.seq.load(std::memory_order_acquire) != s) continue;
    if (!live) return false;
    *out = v;
    return true;
  }
  return false;
}

}  // namespace softrdma
