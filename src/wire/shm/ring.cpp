#include "wire/shm/ring.h"

#include "util/process.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace softrdma::shm {
namespace {

constexpr uint64_t kMagic = 0x474e524d44525253ull;  // "SRRDMRNG" little-endian

// seq word layout: see ring.h.
constexpr uint64_t kFree = 0;
constexpr uint64_t kClaimed = 1;
constexpr uint64_t kCommitted = 2;
constexpr int kSlotsShift = 2;
constexpr int kPidShift = 14;
constexpr int kTagShift = 36;
constexpr uint64_t kStateMask = 3;
constexpr uint64_t kSlotsMask = 0xfff;
constexpr uint64_t kPidMask = (1u << 22) - 1;
// What a consumer that announces its sleep puts in the reserve word in place
// of the last claim (ring.h, "Sleep handshake"): state 3, which no seq word
// holds, so that PublishClaim and PublishStalledClaim never take it for a
// claim.
constexpr uint64_t kConsumerAsleep = 3;

constexpr uint64_t Word(uint64_t lap, uint32_t pid, uint32_t nslots, uint64_t state) {
  return (lap << kTagShift) | (uint64_t{pid} << kPidShift) | (uint64_t{nslots} << kSlotsShift) |
         state;
}
constexpr uint64_t State(uint64_t w) {
  return w & kStateMask;
}
constexpr uint32_t Slots(uint64_t w) {
  return static_cast<uint32_t>((w >> kSlotsShift) & kSlotsMask);
}
constexpr uint32_t Pid(uint64_t w) {
  return static_cast<uint32_t>((w >> kPidShift) & kPidMask);
}
constexpr uint64_t Tag(uint64_t w) {
  return w >> kTagShift;
}
constexpr uint64_t TagOfLap(uint64_t lap) {
  return (lap << kTagShift) >> kTagShift;
}

static_assert(Ring::kMaxRecordSlots <= kSlotsMask);
static_assert(Word(12345, 0, 0, kFree) == Ring::FreeWordOfLap(12345));
static_assert(Word(~0ull, 0, 0, kFree) == Ring::FreeWordOfLap(~0ull));
static_assert(kStateMask == Ring::kSeqStateMask && kCommitted == Ring::kSeqCommitted);
static_assert(Slots(Word(~0ull, 0x3fffff, 4095, kCommitted)) == 4095);
static_assert(Pid(Word(~0ull, 0x3fffff, 4095, kCommitted)) == 0x3fffff);

struct RecordHeader {
  uint32_t len;    // payload bytes
  uint32_t flags;  // kCancelledFlag; other bits zero
};
constexpr uint32_t kCancelledFlag = 1;
static_assert(sizeof(RecordHeader) == Ring::kRecordHeaderBytes);
// The seq array starts right after the header and must stay line-aligned.
static_assert(sizeof(Ring) % kCacheLine == 0);

// The pid producers put in their claims, with kPidKnown set once known (0 =
// not yet). Cached here rather than asked of SelfPid (util/process.h) on
// every record: TryReserve's common case then makes no call at all, and a
// function that calls nothing keeps its values in the registers a call
// would clobber instead of saving and restoring six others. Forgotten in a
// fork()ed child, as SelfPid's own cache is: the child must not claim with
// its parent's pid (the consumer would skip the child's records once the
// parent dies).
constexpr uint32_t kPidKnown = 1u << 31;
std::atomic<uint32_t> g_producer_pid{0};

void ForgetProducerPid() {
  g_producer_pid.store(0, std::memory_order_relaxed);
}

uint32_t ProducerPid() {
  if (const uint32_t v = g_producer_pid.load(std::memory_order_relaxed)) return v & ~kPidKnown;
  static const bool registered = pthread_atfork(nullptr, nullptr, ForgetProducerPid) == 0;
  (void)registered;
  const auto pid = static_cast<uint64_t>(SelfPid());
  // Linux caps pids at 2^22; anything else is recorded as "unknown" (0), which
  // the consumer never treats as dead.
  const uint32_t v = pid <= kPidMask ? static_cast<uint32_t>(pid) : 0;
  g_producer_pid.store(v | kPidKnown, std::memory_order_relaxed);
  return v;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool ValidSlotCount(uint32_t slot_count) {
  return std::has_single_bit(slot_count) && slot_count >= Ring::kMinSlots &&
         slot_count <= Ring::kMaxSlots;
}

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kCacheLine == 0;
}

}  // namespace

// ---- views ----

// The wrapping (or out-of-bounds) cases of Write and CopyOut.
bool Reservation::WriteSlow(uint32_t offset, const void* src, uint32_t len) const {
  if (uint64_t{offset} + len > size_) return false;
  const auto* s = static_cast<const std::byte*>(src);
  if (offset < first_len_) {
    const uint32_t head = std::min(len, first_len_ - offset);
    std::memcpy(first_ + offset, s, head);
    s += head;
    len -= head;
    offset = first_len_;
  }
  if (len != 0) std::memcpy(second_ + (offset - first_len_), s, len);
  return true;
}

bool RecordView::CopyOutSlow(uint32_t offset, void* dst, uint32_t len) const {
  if (uint64_t{offset} + len > size_) return false;
  auto* d = static_cast<std::byte*>(dst);
  if (offset < first_len_) {
    const uint32_t head = std::min(len, first_len_ - offset);
    std::memcpy(d, first_ + offset, head);
    d += head;
    len -= head;
    offset = first_len_;
  }
  if (len != 0) std::memcpy(d, second_ + (offset - first_len_), len);
  return true;
}

// ---- geometry ----

Ring::Ring(uint32_t slot_count, size_t region_bytes)
    : magic_(0),
      version_(kVersion),
      slot_count_(slot_count),
      slot_shift_(static_cast<uint32_t>(std::countr_zero(slot_count))),
      region_bytes_(region_bytes),
      reserve_pos_(0),
      last_claim_(0),
      consume_seen_(0),
      published_end_(0),
      consume_pos_(0),
      wake_word_(0),
      consumer_lock_(0),
      dead_skips_(0) {
  // Position i (lap 0) starts out free.
  std::atomic<uint64_t>* words = seq_words();
  for (uint32_t i = 0; i < slot_count; ++i)
    new (&words[i]) std::atomic<uint64_t>(Word(0, 0, 0, kFree));
  magic_.store(kMagic, std::memory_order_release);
}

size_t Ring::RegionBytes(uint32_t slot_count) {
  if (!ValidSlotCount(slot_count)) return 0;
  return sizeof(Ring) + SeqArrayBytes(slot_count) + size_t{slot_count} * kSlotBytes;
}

Ring* Ring::Format(void* region, size_t bytes, uint32_t slot_count) {
  const size_t need = RegionBytes(slot_count);
  if (region == nullptr || !Aligned(region) || need == 0 || bytes < need) return nullptr;
  return new (region) Ring(slot_count, need);
}

Ring* Ring::Attach(void* region, size_t bytes) {
  if (region == nullptr || !Aligned(region) || bytes < sizeof(Ring)) return nullptr;
  Ring* r = std::launder(reinterpret_cast<Ring*>(region));
  if (r->magic_.load(std::memory_order_acquire) != kMagic || r->version_ != kVersion)
    return nullptr;
  const size_t need = RegionBytes(r->slot_count_);
  if (need == 0 || need > bytes || r->region_bytes_ != need ||
      r->slot_shift_ != static_cast<uint32_t>(std::countr_zero(r->slot_count_))) {
    return nullptr;
  }
  return r;
}

uint32_t Ring::MaxPayload() const {
  return std::min(slot_count_, kMaxRecordSlots) * kSlotBytes - kRecordHeaderBytes;
}

uint64_t Ring::UsedSlots() const {
  const uint64_t c = consume_pos_.load(std::memory_order_acquire);
  const uint64_t p = reserve_pos_.load(std::memory_order_acquire);
  return p > c ? p - c : 0;
}

// Fills the payload spans of the record at `pos`. Records start on a slot, so
// the 8-byte header never wraps; the payload wraps at most once.
template <typename View, typename Byte>
void Ring::Locate(uint64_t pos, uint32_t len, View* v) const {
  const size_t data_bytes = size_t{slot_count_} * kSlotBytes;
  const size_t start = (pos & (slot_count_ - 1)) * kSlotBytes + kRecordHeaderBytes;
  const size_t first_len = std::min<size_t>(len, data_bytes - start);
  v->first_ = reinterpret_cast<Byte*>(data() + start);
  v->second_ = reinterpret_cast<Byte*>(data());
  v->first_len_ = static_cast<uint32_t>(first_len);
  v->size_ = len;
}

// ---- producers ----

// A hint to fetch a line in the exclusive state, ready for our stores.
// GCC turns __builtin_prefetch(p, 1) into a plain read prefetch unless the
// target has PRFCHW; PREFETCHW is a hint every x86-64 CPU executes or ignores.
[[gnu::always_inline]] inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// The reservation's fields once the claim of `n` slots at `p` succeeded:
// the record header and the payload's place (Locate's result, from values
// the caller holds in registers).
inline void Ring::FillReservation(uint64_t p, uint64_t mask, uint32_t slots, std::byte* slot_data,
                                  uint32_t bytes, uint64_t claim, uint64_t last,
                                  Reservation* r) const {
  std::byte* const rec = slot_data + (p & mask) * kSlotBytes;
  // The commit will store to the head's seq word: ask for its line now, so
  // that it comes while the record is written rather than after (the
  // commit's locked store waits for all the record's stores first).
  PrefetchForWrite(&seq(p));
  const RecordHeader hdr{bytes, 0};
  std::memcpy(rec, &hdr, sizeof(hdr));
  const size_t room = (size_t{slots} - (p & mask)) * kSlotBytes - kRecordHeaderBytes;
  r->first_ = rec + kRecordHeaderBytes;
  r->second_ = slot_data;
  r->first_len_ = static_cast<uint32_t>(std::min<size_t>(bytes, room));
  r->size_ = bytes;
  r->pos_ = p;
  r->word_ = claim;
  r->wake_ = last == kConsumerAsleep;
}

// One 16-byte locked CAS. On x86-64 as an explicit cmpxchg16b: compiler
// builtins would do, but ThreadSanitizer replaces 16-byte atomics with an
// emulation under a lock of its own, which another process does not take,
// and the reserve word is shared between processes.
[[gnu::always_inline]] inline bool Ring::CasReserveWord(uint64_t pos, uint64_t last,
                                                        uint64_t new_pos, uint64_t claim) {
  static_assert(offsetof(Ring, reserve_pos_) % 16 == 0 &&
                    offsetof(Ring, last_claim_) == offsetof(Ring, reserve_pos_) + 8,
                "the reserve word is reserve_pos_ then last_claim_, 16-byte aligned");
#if defined(__x86_64__)
  bool swapped;
  uint64_t seen_pos = pos, seen_last = last;
  asm volatile("lock cmpxchg16b %[word]"
               : [word] "+m"(*reinterpret_cast<volatile char(*)[16]>(&reserve_pos_)),
                 "=@ccz"(swapped), "+a"(seen_pos), "+d"(seen_last)
               : "b"(new_pos), "c"(claim)
               : "memory");
  return swapped;
#else
  using Word128 [[gnu::may_alias]] = unsigned __int128;
  auto* word = reinterpret_cast<Word128*>(&reserve_pos_);
  const Word128 expected = (static_cast<Word128>(last) << 64) | pos;
  const Word128 desired = (static_cast<Word128>(claim) << 64) | new_pos;
  return __sync_bool_compare_and_swap(word, expected, desired);
#endif
}

void Ring::ReadReserveWord(uint64_t* pos, uint64_t* last) const {
  // reserve_pos_ grows with every change of the word but one, so a
  // last_claim_ read between two equal reads of it belongs to that position.
  // The one: a consumer's announcement replaces the last claim at the same
  // position (AnnounceSleep, after making sure the claim is in its seq
  // word). A claim read just before it is then stale: a CAS with it fails,
  // and publishing it again does nothing.
  uint64_t p = reserve_pos_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t l = last_claim_.load(std::memory_order_acquire);
    const uint64_t again = reserve_pos_.load(std::memory_order_acquire);
    if (again == p) {
      *pos = p;
      *last = l;
      return;
    }
    p = again;
  }
}

void Ring::PublishClaim(uint64_t end, uint64_t last) {
  const uint32_t n = Slots(last);
  // 0 (nothing reserved yet) or a corrupt word: nothing to publish.
  if (State(last) != kClaimed || n == 0 || n > slot_count_ || end < n) return;
  const uint64_t head = end - n;
  if (Tag(last) != TagOfLap(Lap(head))) return;
  // Fails when the seq word holds the claim or the commit already, or was
  // reset for the next lap by the consumer: all of them mean "published".
  uint64_t expected = Word(Lap(head), 0, 0, kFree);
  seq(head).compare_exchange_strong(expected, last, std::memory_order_acq_rel,
                                    std::memory_order_relaxed);
}

bool Ring::PublishStalledClaim() {
  const uint64_t c = consume_pos_.load(std::memory_order_acquire);
  if (seq(c).load(std::memory_order_acquire) != Word(Lap(c), 0, 0, kFree)) return false;
  uint64_t p = 0, last = 0;
  ReadReserveWord(&p, &last);
  // Only the claim still in the reserve word can be missing from its seq
  // word (every earlier one was published before the word moved on), and
  // only when it is the head's.
  if (p <= c || p - Slots(last) != c) return false;
  PublishClaim(p, last);
  return seq(c).load(std::memory_order_acquire) == last;
}

bool Ring::TryReserve(uint32_t bytes, Reservation* r) {
  // The pid from the cache; the first record of a process (or of a fork()ed
  // child) takes the general path, which asks for it.
  const uint32_t pid_word = g_producer_pid.load(std::memory_order_relaxed);
  if (pid_word == 0) [[unlikely]]
    return TryReserveLoop(bytes, r);
  const uint32_t pid = pid_word & ~kPidKnown;
  // The geometry is immutable after Format: read it once. The atomic
  // operations below are compiler barriers, and members read after them
  // would be loaded again.
  const uint32_t slots = slot_count_;
  const uint64_t mask = slots - 1;
  if (bytes > std::min(slots, kMaxRecordSlots) * kSlotBytes - kRecordHeaderBytes) return false;
  const uint32_t n = SlotsFor(bytes);
  // The common case, straight: the ring has room by consume_seen_, the claim
  // being replaced is known to be committed, and the CAS succeeds (a torn
  // read of the word only makes it fail). Anything else starts over in
  // TryReserveLoop, which decides every case (a failed CAS changed nothing).
  const uint64_t p = reserve_pos_.load(std::memory_order_acquire);
  const uint64_t last = last_claim_.load(std::memory_order_acquire);
  // Acquire: see TryReserveLoop.
  const uint64_t c = consume_seen_.load(std::memory_order_acquire);
  if (c <= p && p - c + n <= slots && published_end_.load(std::memory_order_relaxed) == p)
      [[likely]] {
    const uint64_t claim = Word(p >> slot_shift_, pid, n, kClaimed);
    if (CasReserveWord(p, last, p + n, claim)) [[likely]] {
      FillReservation(p, mask, slots, data(), bytes, claim, last, r);
      return true;
    }
  }
  return TryReserveLoop(bytes, r);
}

bool Ring::TryReserveLoop(uint32_t bytes, Reservation* r) {
  const uint32_t slots = slot_count_;
  if (bytes > std::min(slots, kMaxRecordSlots) * kSlotBytes - kRecordHeaderBytes) return false;
  const uint32_t n = SlotsFor(bytes);
  const uint32_t pid = ProducerPid();
  const uint64_t mask = slots - 1;
  // Acquire on the consumer position orders our writes to these slots after
  // the consumer's reads of their previous lap (through the producer that
  // copied it into consume_seen_, with release, when it came from there).
  uint64_t c = consume_seen_.load(std::memory_order_acquire);
  bool c_current = false;
  uint64_t behind_consumer = ~0ull;  // a reserve_pos seen below the consumer
  for (;;) {
    uint64_t p = 0, last = 0;
    ReadReserveWord(&p, &last);
    if (c > p) {
      // The consumer is past reserve_pos: either p is stale (read again) or,
      // when the same p is seen twice, the region is corrupt (report "full"
      // instead of spinning).
      if (p == behind_consumer) return false;
      behind_consumer = p;
      continue;
    }
    // A stale (smaller) c makes this check stricter, so "full" is only
    // believed from the consumer's own word.
    if (p - c + n > slots) {
      if (c_current) return false;
      c = consume_pos_.load(std::memory_order_acquire);
      consume_seen_.store(c, std::memory_order_release);
      c_current = true;
      continue;
    }
    if (published_end_.load(std::memory_order_relaxed) != p) PublishClaim(p, last);
    const uint64_t claim = Word(Lap(p), pid, n, kClaimed);
    if (CasReserveWord(p, last, p + n, claim)) {
      FillReservation(p, mask, slots, data(), bytes, claim, last, r);
      return true;
    }
    // Another producer reserved meanwhile: start over from the new word.
  }
}

void Ring::Cancel(const Reservation& r) {
  // Published like any record so that records reserved after it are not held
  // up; the consumer drops it without showing it.
  RecordHeader hdr{r.size(), kCancelledFlag};
  std::memcpy(data() + (r.pos_ & (slot_count_ - 1)) * kSlotBytes, &hdr, sizeof(hdr));
  Commit(r);
}

// The straight case of a small record: the pid is cached, the ring has room
// by consume_seen_, the record does not wrap, header and payload are at most
// kStraightCopyBytes each, and the claim succeeds. Everything is decided
// before the claim, so any other case can start over in TryProduceSlow (a
// failed claim changed nothing). A function that calls nothing (the slow
// path and the wake-up are jumps) keeps its values in the registers a call
// would clobber: no Reservation passed through memory, no frame, no copies
// through libc (an ACK, a small SEND: one call instead of Engine::Send's
// TryReserve + Write + Commit).
bool Ring::TryProduce(const void* hdr, uint32_t hdr_len, const void* payload,
                      uint32_t payload_len) {
  constexpr uint32_t kStraightCopyBytes = 64;
  const uint32_t pid_word = g_producer_pid.load(std::memory_order_relaxed);
  if (pid_word == 0 || hdr_len > kStraightCopyBytes || payload_len > kStraightCopyBytes)
      [[unlikely]]
    return TryProduceSlow(hdr, hdr_len, payload, payload_len);
  const uint32_t bytes = hdr_len + payload_len;  // <= 128: below any MaxPayload()
  const uint32_t slots = slot_count_;
  const uint64_t mask = slots - 1;
  // Two slots at least (SlotsFor): a record that fits one slot (an 8-byte
  // SEND, an ACK) takes two, and both lines are asked for below, so that the
  // line after a record's first is its own. The consumer's HeadWord
  // prefetches the head's line and the next one; with one-slot records that
  // next line was the one the producer was about to write, and an idle
  // consumer's polls kept taking it away. ib_send_bw -s 8 -n 5000000
  // unpinned, alternating builds: median per-round ratio 1.05-1.21 in three
  // sets, faster in 22 of 26 rounds; without asking for the padding line,
  // 1.00 (performance.md, "The 8-byte SEND rate, unpinned").
  const uint32_t n = SlotsFor(bytes);
  const uint64_t p = reserve_pos_.load(std::memory_order_acquire);
  const uint64_t last = last_claim_.load(std::memory_order_acquire);
  // Acquire: see TryReserveLoop.
  const uint64_t c = consume_seen_.load(std::memory_order_acquire);
  const uint64_t index = p & mask;
  if (c > p || p - c + n > slots || index + n > slots ||
      published_end_.load(std::memory_order_relaxed) != p) [[unlikely]]
    return TryProduceSlow(hdr, hdr_len, payload, payload_len);
  std::atomic<uint64_t>* const words = seq_words();
  std::byte* const rec =
      reinterpret_cast<std::byte*>(words) + SeqArrayBytes(slots) + index * kSlotBytes;
  // Ask for the slot's line for writing before the claim, so that it comes
  // in while the CAS runs, and for the seq word's, which the commit stores
  // to (as FillReservation). Every line of the record: a SEND of 9 to 72
  // bytes is a two-slot record, whose second line otherwise was asked for
  // only by its store, and the next post's QP lock waited for it
  // (ib_send_bw -s 64 pinned: 37 % of the sender's samples on that lock).
  PrefetchForWrite(rec);
  if (n > 1) PrefetchForWrite(rec + kSlotBytes);
  if (n > 2) PrefetchForWrite(rec + 2 * kSlotBytes);
  PrefetchForWrite(&words[index]);
  const uint64_t claim = Word(p >> slot_shift_, pid_word & ~kPidKnown, n, kClaimed);
  if (!CasReserveWord(p, last, p + n, claim)) [[unlikely]]
    return TryProduceSlow(hdr, hdr_len, payload, payload_len);
  const RecordHeader rh{bytes, 0};
  std::memcpy(rec, &rh, sizeof(rh));
  Reservation::CopySmall(rec + kRecordHeaderBytes, static_cast<const std::byte*>(hdr), hdr_len);
  Reservation::CopySmall(rec + kRecordHeaderBytes + hdr_len, static_cast<const std::byte*>(payload),
                         payload_len);
  // Commit, as Commit(): a release store, and a wake-up if the claim took a
  // sleeping consumer's announcement.
  words[index].store((claim & ~kStateMask) | kCommitted, std::memory_order_release);
  published_end_.store(p + n, std::memory_order_release);
  // The next record's line, asked for now so that it comes over while the
  // application goes on, not when that record's stores wait for it (the
  // next locked instruction, the QP lock of the next post, waits for every
  // store before it). Both lines if this record took two: a stream's
  // records are usually of one size.
  std::byte* const slot_data = reinterpret_cast<std::byte*>(words) + SeqArrayBytes(slots);
  PrefetchForWrite(slot_data + ((index + n) & mask) * kSlotBytes);
  if (n > 1) PrefetchForWrite(slot_data + ((index + n + 1) & mask) * kSlotBytes);
  if (last == kConsumerAsleep) [[unlikely]]
    return WakeAfterCommit();
  return true;
}

bool Ring::TryProduceSlow(const void* hdr, uint32_t hdr_len, const void* payload,
                          uint32_t payload_len) {
  const uint64_t total = uint64_t{hdr_len} + payload_len;
  if (total > MaxPayload()) return false;
  Reservation r;
  if (!TryReserve(static_cast<uint32_t>(total), &r)) return false;
  if (hdr_len != 0) r.Write(0, hdr, hdr_len);
  if (payload_len != 0) r.Write(hdr_len, payload, payload_len);
  Commit(r);
  return true;
}

// A record of a few hundred bytes or more (a 1 KiB SEND, a datagram) is
// usually followed by one of its size: its lines, last written a lap ago
// (4 MiB of the ring's traffic), have left the cores' caches, and the next
// record's stores waited for each of them, on the round trip of a ping-pong
// (SOFTRDMA_RING_SLOTS=4096 made ibv_ud_pingpong -s 1024 ~0.2 us faster).
// Asked for now, they come while the application waits for its answer.
// Not the first two lines: the consumer's idle polls read those (HeadWord),
// and would take them back. Not slots the producer cannot know free (the
// ring nearly full): those may hold records the consumer still reads. Not
// after a record of more than kPrefetchNextMaxSlots: a larger record is a
// stream's (the bandwidth rows, untouched), whose stores follow one another
// closely anyway.
void Ring::PrefetchNextRecord(uint64_t end, uint32_t nslots) const {
  constexpr uint32_t kPrefetchNextMaxSlots = 36;  // a 2 KiB SEND with its headers
  if (nslots > kPrefetchNextMaxSlots) return;
  const uint32_t slots = slot_count_;
  const uint64_t c = consume_seen_.load(std::memory_order_relaxed);
  if (c > end || end + nslots - c > slots) return;
  const uint64_t mask = slots - 1;
  std::byte* const slot_data = data();
  for (uint32_t i = 2; i < nslots; ++i)
    PrefetchForWrite(slot_data + ((end + i) & mask) * kSlotBytes);
}

bool Ring::WakeAfterCommit() {
  Wake();
  return true;
}

// ---- consumer ----

bool Ring::PeekAt(uint64_t* cursor, RecordView* v) {
  for (;;) {
    const uint64_t c = *cursor;
    const uint64_t w = seq(c).load(std::memory_order_acquire);
    if (Tag(w) != TagOfLap(Lap(c))) return false;  // only a corrupt region gets here
    if (State(w) == kCommitted) {
      // Clamp what a corrupt word or header could claim, so that a bad record
      // can neither read outside the data array nor stall the ring.
      const uint32_t n = std::clamp(Slots(w), 1u, std::min(slot_count_, kMaxRecordSlots));
      RecordHeader hdr;
      std::memcpy(&hdr, data() + (c & (slot_count_ - 1)) * kSlotBytes, sizeof(hdr));
      if (hdr.flags & kCancelledFlag) {
        ResetSlots(c, n);
        *cursor = c + n;
        continue;
      }
      const uint32_t len = std::min(hdr.len, n * kSlotBytes - kRecordHeaderBytes);
      v->pos_ = c;
      v->nslots_ = n;
      Locate<RecordView, const std::byte>(c, len, v);
      return true;
    }
    if (State(w) == kClaimed && SkipIfDead(c, w)) {
      *cursor = c + Slots(w);
      continue;
    }
    return false;
  }
}

// The record at `pos` is claimed but not committed. After it has stayed so for
// kDeadProducerCheckNs, and then once per such period, ask whether the claimer
// still runs; if it certainly does not, nobody will ever write these slots
// again and they can be freed. The claim word is in the reserve word from the
// reservation's first instant and in the seq word before it leaves the
// reserve word (ring.h), so there is no record whose owner is unknown; one
// still only in the reserve word gets here once PublishStalledClaim wrote it.
// Limits: pids are compared in the consumer's pid namespace (producers in
// another pid namespace must not share a ring), a recycled pid keeps the
// record stalled until that new process exits too, and a producer THREAD
// that exits between reserve and commit while its process lives is not
// detected (that is a bug in the caller, not a crash).
bool Ring::SkipIfDead(uint64_t pos, uint64_t word) {
  const int64_t now = MonotonicNs();
  if (stall_since_ns_ == 0 || stall_pos_ != pos) {
    stall_pos_ = pos;
    stall_since_ns_ = now;
    return false;
  }
  if (now - stall_since_ns_ < kDeadProducerCheckNs) return false;
  stall_since_ns_ = now;
  const uint32_t pid = Pid(word);
  const uint32_t n = Slots(word);
  if (pid == 0 || n == 0 || n > slot_count_ || !ProcessGone(static_cast<pid_t>(pid))) return false;
  // The claimer may have committed after we read `word` and exited before we
  // asked: then the record is complete and must be delivered, not dropped.
  if (seq(pos).load(std::memory_order_acquire) != word) return false;
  ResetSlots(pos, n);
  stall_since_ns_ = 0;
  dead_skips_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Ring::ResetSlots(uint64_t pos, uint32_t nslots) {
  // Each slot becomes "free for the same index one lap later". Relaxed: the
  // release store of consume_pos that follows publishes these, and producers
  // read consume_pos (acquire) before they look at a slot.
  for (uint32_t k = 0; k < nslots; ++k) {
    seq(pos + k).store(Word(Lap(pos + k) + 1, 0, 0, kFree), std::memory_order_relaxed);
  }
}

bool Ring::Peek(RecordView* v) {
  const uint64_t start = consume_pos_.load(std::memory_order_relaxed);
  uint64_t cursor = start;
  const bool found = PeekAt(&cursor, v);
  if (cursor != start) consume_pos_.store(cursor, std::memory_order_release);
  return found;
}

void Ring::Release(const RecordView& v) {
  ResetSlots(v.pos_, v.nslots_);
  consume_pos_.store(v.pos_ + v.nslots_, std::memory_order_release);
}

Ring::HeadState Ring::Head() const {
  uint64_t pos = 0;
  return Head(&pos);
}

Ring::HeadState Ring::Head(uint64_t* pos) const {
  uint64_t c = consume_pos_.load(std::memory_order_acquire);
  uint64_t w = seq(c).load(std::memory_order_acquire);
  // A consumer that moved on meanwhile reset the slot for its next lap,
  // which reads as "empty" at a position that is no longer the head: a
  // record committed at the new head would go unnoticed. Look again there.
  for (uint64_t now; (now = consume_pos_.load(std::memory_order_acquire)) != c;) {
    c = now;
    w = seq(c).load(std::memory_order_acquire);
  }
  *pos = c;
  if (Tag(w) != TagOfLap(Lap(c))) return HeadState::kEmpty;
  switch (State(w)) {
    case kCommitted:
      return HeadState::kReady;
    case kClaimed:
      return HeadState::kPending;
    default:
      return HeadState::kEmpty;
  }
}

void Ring::Wake(uint32_t bits) {
  wake_word_.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_word_), FUTEX_WAKE_BITSET, 1, nullptr,
          nullptr, bits);
}

bool Ring::AnnounceSleep() {
  for (;;) {
    uint64_t p = 0, last = 0;
    ReadReserveWord(&p, &last);
    const uint64_t c = consume_pos_.load(std::memory_order_acquire);
    // A claim leaves the reserve word only once it is in its seq word (see
    // "helping" in ring.h), our marker's CAS as a producer's.
    if (last != kConsumerAsleep && published_end_.load(std::memory_order_relaxed) != p)
      PublishClaim(p, last);
    // Even when the marker is there already (another waiting thread, or an
    // earlier sleep that no producer ended): a locked operation that reads
    // the word as it is now, after the caller took the wake word. A producer
    // that takes the marker after it moves the wake word after it.
    if (CasReserveWord(p, last, p, kConsumerAsleep)) return p == c;
  }
}

Ring::WakeReason Ring::Sleep(uint32_t expected, int64_t timeout_ns, uint32_t wake_bits) {
  timespec ts;
  timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    // FUTEX_WAIT_BITSET's timeout is absolute (CLOCK_MONOTONIC).
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t ns = ts.tv_nsec + timeout_ns % 1'000'000'000;
    ts.tv_sec += timeout_ns / 1'000'000'000 + ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
    tsp = &ts;
  }
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_word_), FUTEX_WAIT_BITSET,
                    expected, tsp, nullptr, wake_bits);
  if (rc == 0) return WakeReason::kWoken;
  if (errno == ETIMEDOUT) return WakeReason::kTimedOut;
  if (errno == EINTR) return WakeReason::kInterrupted;
  return WakeReason::kWoken;  // EAGAIN: the word already moved on, i.e. a wake-up
}

}  // namespace softrdma::shm
