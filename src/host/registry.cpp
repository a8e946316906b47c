#include "host/registry.h"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/mcast_groups.h"
#include "host/unusable_shm.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/log.h"
#include "util/process.h"

namespace softrdma {

namespace {

constexpr uint64_t kMagic = 0x31474552414d4453ull;  // "SDMAREG1"
// 2: published QP attributes and the atomic lock stripes (one-sided operations).
constexpr uint32_t kLayoutVersion = 3;  // 3: multicast table

uint64_t ProcessStartTime(pid_t pid) {
  return ReadProcStat(pid).start_time;
}

// owner word of a process slot: pid in the low 32 bits, generation above.
uint64_t PackOwner(uint32_t gen, pid_t pid) {
  return (uint64_t{gen} << 32) | uint32_t(pid);
}
pid_t OwnerPid(uint64_t w) {
  return static_cast<pid_t>(w & 0xffffffffu);
}
uint32_t OwnerGen(uint64_t w) {
  return static_cast<uint32_t>(w >> 32);
}

// QPN table word: slot+1 in the low 32 bits (0 = free), generation above.
uint64_t PackQpn(ProcRef r) {
  return (uint64_t{r.gen} << 32) | (r.slot + 1);
}

}  // namespace

struct Registry::Layout {
  uint64_t magic;
  uint32_t version;
  uint32_t max_procs;
  uint32_t qpn_table_size;
  std::atomic<uint32_t> next_qpn;
  std::atomic<uint32_t> ready;
  struct Proc {
    std::atomic<uint64_t> owner;       // PackOwner(gen, pid); pid 0 = free
    std::atomic<uint64_t> start_time;  // 0 until the owner has written it
  } procs[kRegistryMaxProcs];
  std::atomic<uint64_t> qpn_owner[kQpnTableSize];
  PublishedQp published_qps[kQpnTableSize];
  std::atomic<uint32_t> atomic_locks[kAtomicLockStripes];
  McastSlot mcast[kMcastTableSize];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

std::string Registry::RegistryName() {
  return GetConfig().ShmPrefix() + "-registry";
}

std::string Registry::ProcSegmentName(ProcRef ref) {
  return GetConfig().ShmPrefix() + "-proc-" + std::to_string(ref.slot) + "-" +
         std::to_string(ref.gen);
}

namespace {

// What a process that did not create the registry waits for: its creator
// sizes it, then writes the header, then sets `ready`.
constexpr uint64_t kCreatorWaitNs = 2000000000ull;

// The header fields, at offsets every layout version so far shares: enough
// to tell another version or a damaged file from ours.
struct RegistryHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t max_procs;
  uint32_t qpn_table_size;
  uint32_t next_qpn;
  uint32_t ready;
};
static_assert(offsetof(RegistryHeader, version) == 8 && offsetof(RegistryHeader, ready) == 24);

Status Unusable(int code, const std::string& name, const std::string& reason) {
  return Status::Error(code, UnusableShm(name, reason));
}

// An existing registry we opened (fd): checks it is ours to use and waits
// for its creator to finish.
Status CheckExisting(int fd, const std::string& name, size_t expected) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Error(errno, "fstat " + ShmPath(name));
  // Its owner can write into it whenever it likes, and so decide what this
  // process's memory and QPs do (root could otherwise open anyone's).
  if (st.st_uid != geteuid())
    return Unusable(EACCES, name,
                    "belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
                        std::to_string(geteuid()) + ")");
  const uint64_t deadline = NowNs() + kCreatorWaitNs;
  while (static_cast<size_t>(st.st_size) < sizeof(RegistryHeader) && NowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (fstat(fd, &st) != 0) return Status::Error(errno, "fstat " + ShmPath(name));
  }
  if (static_cast<size_t>(st.st_size) < sizeof(RegistryHeader))
    return Unusable(EPROTO, name,
                    "is empty or truncated (" + std::to_string(st.st_size) +
                        " bytes): damaged, or its creator died while making it");
  const size_t header_bytes = sizeof(RegistryHeader);
  void* mem = mmap(nullptr, header_bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return Status::Error(errno, "mmap " + ShmPath(name));
  const auto* h = static_cast<const RegistryHeader*>(mem);
  auto magic = [h] { return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE); };
  auto ready = [h] { return __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE); };
  while ((magic() == 0 || (magic() == kMagic && h->version == kLayoutVersion && !ready())) &&
         NowNs() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const uint64_t m = magic();
  const uint32_t version = h->version;
  const bool is_ready = ready() != 0;
  munmap(mem, header_bytes);
  if (m == 0)
    return Unusable(EPROTO, name, "has no header: damaged, or its creator died while making it");
  if (m != kMagic) return Unusable(EPROTO, name, "is damaged (not a softrdma registry header)");
  if (version != kLayoutVersion)
    return Unusable(EPROTO, name,
                    "was made by another softrdma version (registry layout " +
                        std::to_string(version) + ", this library uses " +
                        std::to_string(kLayoutVersion) + ")");
  if (static_cast<size_t>(st.st_size) != expected)
    return Unusable(EPROTO, name,
                    "is damaged (" + std::to_string(st.st_size) + " bytes, layout " +
                        std::to_string(kLayoutVersion) + " has " + std::to_string(expected) + ")");
  if (!is_ready)
    return Unusable(EPROTO, name, "was left half-made: its creator died while setting it up");
  return Status::Ok();
}

// Linux never hands out a pid above this (PID_MAX_LIMIT on 64-bit).
constexpr int64_t kPidMaxLimit = 4194304;

bool PlausiblePid(int64_t pid) {
  return pid >= 0 && pid <= kPidMaxLimit;
}

}  // namespace

// A registry whose header is good may still hold garbage in its tables
// (overwritten by a stray program, a disk image, a test). Processes only
// ever write values of the shapes below, so a value of another shape is
// damage; left in place it would make us index past a table or wait on a
// lock "held" by a pid that no process can have. Returns what is wrong, or
// "" (one pass over the tables: about 6 MiB read, at attach only).
std::string Registry::DamageIn(const Layout& l) {
  if (l.max_procs != kRegistryMaxProcs || l.qpn_table_size != kQpnTableSize)
    return "is damaged (its header says " + std::to_string(l.max_procs) + " process slots and " +
           std::to_string(l.qpn_table_size) + " QPNs; layout " + std::to_string(kLayoutVersion) +
           " has " + std::to_string(kRegistryMaxProcs) + " and " + std::to_string(kQpnTableSize) +
           ")";
  for (uint32_t i = 0; i < kRegistryMaxProcs; ++i) {
    const pid_t pid = OwnerPid(l.procs[i].owner.load(std::memory_order_relaxed));
    if (!PlausiblePid(pid))
      return "is damaged (process slot " + std::to_string(i) + " names pid " + std::to_string(pid) +
             ")";
  }
  for (uint32_t n = 0; n < kQpnTableSize; ++n) {
    const uint64_t w = l.qpn_owner[n].load(std::memory_order_relaxed);
    const uint32_t slot_plus_one = static_cast<uint32_t>(w & 0xffffffffu);
    if (w != 0 && (slot_plus_one == 0 || slot_plus_one > kRegistryMaxProcs))
      return "is damaged (QPN " + std::to_string(n) + " names process slot " +
             std::to_string(int64_t{slot_plus_one} - 1) + ")";
    const uint32_t published_slot =
        __atomic_load_n(&l.published_qps[n].owner_slot, __ATOMIC_RELAXED);
    if (published_slot >= kRegistryMaxProcs)
      return "is damaged (the attributes of QPN " + std::to_string(n) + " name process slot " +
             std::to_string(published_slot) + ")";
  }
  for (uint32_t i = 0; i < kAtomicLockStripes; ++i) {
    const auto holder = static_cast<pid_t>(l.atomic_locks[i].load(std::memory_order_relaxed));
    if (!PlausiblePid(holder))
      return "is damaged (atomic lock " + std::to_string(i) + " is held by pid " +
             std::to_string(holder) + ")";
  }
  for (uint32_t i = 0; i < kMcastTableSize; ++i) {
    if (!McastWordPlausible(l.mcast[i].word.load(std::memory_order_relaxed)))
      return "is damaged (multicast attachment " + std::to_string(i) + " is not a valid entry)";
  }
  return "";
}

Status Registry::Open(Registry* out) {
  static_assert(offsetof(Layout, version) == offsetof(RegistryHeader, version) &&
                    offsetof(Layout, ready) == offsetof(RegistryHeader, ready),
                "the header that tells versions apart starts every layout");
  const std::string name = RegistryName();
  const size_t bytes = sizeof(Layout);
  bool creator = false;
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    creator = true;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      return Status::Error(e, "cannot size " + ShmPath(name) + ": " + strerror(e));
    }
  } else if (errno == EEXIST) {
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int e = errno;
      struct stat st {};
      if (e == EACCES && stat(ShmPath(name).c_str(), &st) == 0)
        return Unusable(e, name,
                        "belongs to uid " + std::to_string(st.st_uid) + " and this user (uid " +
                            std::to_string(geteuid()) + ") may not open it");
      return Unusable(e, name, std::string("cannot be opened: ") + strerror(e));
    }
    if (Status s = CheckExisting(fd, name, bytes); !s.ok()) {
      close(fd);
      return s;
    }
  } else {
    return Status::Error(errno, "cannot create " + ShmPath(name) + ": " + strerror(errno));
  }
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return Status::Error(errno, "mmap " + ShmPath(name));
  auto* l = static_cast<Layout*>(mem);
  if (!creator) {
    if (std::string damage = DamageIn(*l); !damage.empty()) {
      munmap(mem, bytes);
      return Unusable(EPROTO, name, damage);
    }
  } else {
    // ftruncate zero-filled everything: a zero entry is a free entry. The
    // magic goes last but `ready`: who sees it sees the version too.
    l->version = kLayoutVersion;
    l->max_procs = kRegistryMaxProcs;
    l->qpn_table_size = kQpnTableSize;
    l->next_qpn.store(kFirstQpn, std::memory_order_relaxed);
    __atomic_store_n(&l->magic, kMagic, __ATOMIC_RELEASE);
    l->ready.store(1, std::memory_order_release);
  }
  out->layout_ = l;
  out->published_qps_ = l->published_qps;
  out->qpn_base_ = QpnInSlot(QpnSlotFor(GetConfig().shm_namespace, getuid()), 0);
  out->bytes_ = bytes;
  return Status::Ok();
}

Registry::~Registry() {
  if (layout_) munmap(layout_, bytes_);
}

bool Registry::EntryAlive(uint32_t slot, uint64_t owner_word) const {
  pid_t pid = OwnerPid(owner_word);
  if (pid <= 0) return false;  // free; never a process (kill() would take it as a group)
  uint64_t recorded = layout_->procs[slot].start_time.load(std::memory_order_acquire);
  // Ourselves: alive, without a system call and a read of /proc (this is on
  // every connect to a QP of our own process).
  if (pid == SelfPid() && self_start_time_ != 0 && recorded == self_start_time_) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  ProcStat st = ReadProcStat(pid);
  if (st.start_time == 0 || st.zombie) return false;
  // 0 = the owner has not recorded it yet: it is alive and attaching.
  return recorded == 0 || recorded == st.start_time;
}

Status Registry::AttachProcess(ProcRef* me, void (*on_reclaim)(ProcRef dead)) {
  const pid_t pid = getpid();
  const uint64_t start = ProcessStartTime(pid);
  for (uint32_t i = 0; i < kRegistryMaxProcs; ++i) {
    auto& e = layout_->procs[i];
    uint64_t w = e.owner.load(std::memory_order_acquire);
    bool reclaim = OwnerPid(w) != 0;
    if (reclaim && EntryAlive(i, w)) continue;
    uint64_t claimed = PackOwner(OwnerGen(w) + 1, pid);
    // A stale start_time would make a concurrent liveness check call us dead;
    // clear it first, CAS, then publish ours.
    if (!e.owner.compare_exchange_strong(w, claimed, std::memory_order_acq_rel)) continue;
    e.start_time.store(start ? start : 1, std::memory_order_release);
    self_start_time_ = start ? start : 1;
    if (reclaim && on_reclaim) on_reclaim(ProcRef{i, OwnerGen(w)});
    *me = ProcRef{i, OwnerGen(claimed)};
    return Status::Ok();
  }
  return Status::Error(EAGAIN, "host registry full: too many softrdma processes");
}

void Registry::DetachProcess(ProcRef me) {
  auto& e = layout_->procs[me.slot];
  uint64_t w = e.owner.load(std::memory_order_acquire);
  if (OwnerGen(w) != me.gen || OwnerPid(w) != getpid()) return;
  // Keep the generation so the next owner gets a new one.
  e.start_time.store(0, std::memory_order_relaxed);
  e.owner.compare_exchange_strong(w, PackOwner(me.gen, 0), std::memory_order_acq_rel);
}

pid_t Registry::LivePid(ProcRef ref) const {
  if (ref.slot >= kRegistryMaxProcs) return 0;
  uint64_t w = layout_->procs[ref.slot].owner.load(std::memory_order_acquire);
  if (OwnerGen(w) != ref.gen || !EntryAlive(ref.slot, w)) return 0;
  return OwnerPid(w);
}

Status Registry::AllocQpn(ProcRef owner, uint32_t* qpn) {
  const uint64_t mine = PackQpn(owner);
  for (uint32_t tries = 0; tries < kQpnTableSize; ++tries) {
    uint32_t n = layout_->next_qpn.fetch_add(1, std::memory_order_relaxed) % kQpnTableSize;
    if (n < kFirstQpn) continue;
    auto& slot = layout_->qpn_owner[n];
    uint64_t w = slot.load(std::memory_order_acquire);
    if (w != 0) {
      ProcRef holder{static_cast<uint32_t>(w & 0xffffffffu) - 1, static_cast<uint32_t>(w >> 32)};
      if (LivePid(holder) != 0) continue;  // in use
    }
    if (slot.compare_exchange_strong(w, mine, std::memory_order_acq_rel)) {
      *qpn = QpnAt(n);
      return Status::Ok();
    }
  }
  return Status::Error(ENOMEM, "no free QPN on the device");
}

void Registry::FreeQpn(ProcRef owner, uint32_t qpn) {
  const uint32_t index = IndexOf(qpn);
  if (index >= kQpnTableSize) return;
  uint64_t expected = PackQpn(owner);
  layout_->qpn_owner[index].compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

std::atomic<uint32_t>* Registry::atomic_lock_words() const {
  return layout_->atomic_locks;
}

McastSlot* Registry::mcast_slots() const {
  return layout_->mcast;
}

bool Registry::QpnOwner(uint32_t qpn, ProcRef* owner) const {
  const uint32_t index = IndexOf(qpn);
  if (index >= kQpnTableSize) return false;
  uint64_t w = layout_->qpn_owner[index].load(std::memory_order_acquire);
  const uint32_t slot_plus_one = static_cast<uint32_t>(w & 0xffffffffu);
  // Anything else is damage written after attach (DamageIn checks at attach).
  if (slot_plus_one == 0 || slot_plus_one > kRegistryMaxProcs) return false;
  *owner = ProcRef{slot_plus_one - 1, static_cast<uint32_t>(w >> 32)};
  return true;
}

bool Registry::LookupQpn(uint32_t qpn, ProcRef* owner) const {
  ProcRef r;
  if (!QpnOwner(qpn, &r) || LivePid(r) == 0) return false;
  *owner = r;
  return true;
}

}  // namespace softrdma
