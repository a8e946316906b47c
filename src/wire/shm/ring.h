// The shm wire's inbound ring: one per process, in a POSIX shared-memory
// region that every process on the host may map. Many producers (any thread of
// any process), one consumer at a time (the owner). Records are variable
// length, made of consecutive 64-byte slots; positions are absolute u64
// counters that never wrap, slot index = pos & (slot_count - 1).
//
// Reservation protocol (layout version 3). A producer reserves by one 16-byte
// CAS on the reserve word, on the producers' own cache line: (reserve_pos,
// last_claim) -> (reserve_pos + n, its claim word), the claim word holding
// the record's lap, slot count and the producer's pid. It then writes the
// record and commits by storing the committed word into the seq word of the
// record's first slot, the word the consumer polls. The claim is not written
// there first: a producer that had to (a CAS on the line the consumer is
// spinning on) would wait for that line before it could even begin the
// record, and the line would then cross once more for the commit.
//
// So that the owner of every reserved record stays known (to skip the
// record of a producer killed between reserve and commit, see SkipIfDead),
// a claim leaves the reserve word only once it is in its seq word: before
// its own CAS a producer makes sure the claim it replaces is there, by a CAS
// of that seq word from "free" to the claim ("helping"; it fails harmlessly
// when the record was committed or consumed meanwhile). It skips that when
// published_end says the record ending at reserve_pos was committed:
// positions never repeat, so one record ends there, and published_end is
// only ever set after a commit. A claim still alone in the reserve word
// (nobody reserved after it) is written to its seq word by
// PublishStalledClaim, which consumers call before they sleep and now and
// then: a record is invisible (Head() says kEmpty) until then or its commit.
//
// seq word of a slot (u64):
//   bits 63..36  lap tag: (pos >> log2(slot_count)) mod 2^28
//   bits 35..14  pid of the claimer (0 = unknown: never treated as dead)
//   bits 13..2   number of slots of the record (head slot only)
//   bits  1..0   state: free / claimed / committed (a fourth, the sleeping
//                consumer's marker, appears only in the reserve word)
// Every slot is rewritten once per lap (commit, and maybe a published claim
// before it, on heads; reset to "free for the next lap" by the consumer on
// release for all slots), so the consumer never sees a stale word that could
// pass for the current lap. A helper that stalls for 2^28 laps between
// reading the reserve word and its CAS could be fooled by the truncated tag;
// with a 1 MiB ring that is 256 TiB of traffic.
//
// Sleep handshake (layout version 5). A consumer about to sleep announces it
// in the reserve word, by a CAS that puts kConsumerAsleep (ring.cpp) in
// place of the last claim. A producer's reservation CAS replaces the marker
// in turn, so exactly the first producer to reserve after an announcement
// sees it, and that producer wakes the consumer after its commit. The commit
// itself is then a plain release store with nothing after it: before, it
// was a seq_cst store followed by a load of a sleep flag (a Dekker pair with
// the consumer), and that full barrier made every producer wait for the
// record's lines to come over from the consumer's core before it could go
// on (75% of an ib_send_bw -s 8 sender's samples in TryProduce). The marker
// covers records reserved after it only: AnnounceSleep says whether every
// record reserved before it was already consumed; if not, one of them may
// commit without a wake-up, and the consumer sleeps kUncoveredSleepNs at
// most.
//
// Producers read the consumer position only when the ring looks full by the
// value a producer last read (consume_seen_, on the producers' own line):
// reading the consumer's line on every record costs a cross-core miss each
// time, since the consumer has just written it (since layout version 2).
//
// The Ring object IS the mapped header: it stores no pointers, only offsets
// implied by slot_count, because every process maps the region elsewhere.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>

namespace softrdma::shm {

inline constexpr uint32_t kSlotBytes = 64;
inline constexpr uint32_t kCacheLine = 64;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shm atomics must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex word must be 32 bits");

// A record's payload as up to two contiguous pieces: the second is non-empty
// only when the record wraps at the end of the data array.
template <typename Byte>
class SplitBytes {
 public:
  uint32_t size() const { return size_; }
  std::span<Byte> first() const { return {first_, first_len_}; }
  std::span<Byte> second() const { return {second_, size_ - first_len_}; }

 protected:
  Byte* first_ = nullptr;
  Byte* second_ = nullptr;
  uint32_t first_len_ = 0;
  uint32_t size_ = 0;
};

class Ring;

// A reserved, not yet committed record. Process-local; lives on the stack.
class Reservation : public SplitBytes<std::byte> {
 public:
  // Copies into the payload at `offset`, hiding the wrap. Returns false and
  // writes nothing if [offset, offset + len) is outside the payload. Inline
  // for the common case of bytes before the wrap (every small record).
  bool Write(uint32_t offset, const void* src, uint32_t len) const {
    if (uint64_t{offset} + len > first_len_) return WriteSlow(offset, src, len);
    CopySmall(first_ + offset, static_cast<const std::byte*>(src), len);
    return true;
  }
  // memcpy, but a copy of at most 64 bytes whose length is known only at run
  // time is done here with two overlapping loads and stores of the largest
  // size that fits instead of a call into libc (a record's header, a small
  // SEND's data: ib_send_lat -s 8).
  static void CopySmall(std::byte* dst, const std::byte* src, uint32_t len) {
    using V16 = long long __attribute__((vector_size(16)));
    if (__builtin_constant_p(len) || len > 64) {
      std::memcpy(dst, src, len);
    } else if (len > 32) {
      V16 a, b, c, d;  // vector values stay in registers (byte arrays did not)
      std::memcpy(&a, src, 16);
      std::memcpy(&b, src + 16, 16);
      std::memcpy(&c, src + len - 32, 16);
      std::memcpy(&d, src + len - 16, 16);
      std::memcpy(dst, &a, 16);
      std::memcpy(dst + 16, &b, 16);
      std::memcpy(dst + len - 32, &c, 16);
      std::memcpy(dst + len - 16, &d, 16);
    } else if (len > 16) {
      V16 a, b;
      std::memcpy(&a, src, 16);
      std::memcpy(&b, src + len - 16, 16);
      std::memcpy(dst, &a, 16);
      std::memcpy(dst + len - 16, &b, 16);
    } else if (len >= 8) {
      uint64_t a, b;
      std::memcpy(&a, src, 8);
      std::memcpy(&b, src + len - 8, 8);
      std::memcpy(dst, &a, 8);
      std::memcpy(dst + len - 8, &b, 8);
    } else if (len >= 4) {
      uint32_t a, b;
      std::memcpy(&a, src, 4);
      std::memcpy(&b, src + len - 4, 4);
      std::memcpy(dst, &a, 4);
      std::memcpy(dst + len - 4, &b, 4);
    } else if (len != 0) {
      const std::byte first = src[0], middle = src[len / 2], last = src[len - 1];
      dst[0] = first;
      dst[len / 2] = middle;
      dst[len - 1] = last;
    }
  }

 private:
  friend class Ring;
  bool WriteSlow(uint32_t offset, const void* src, uint32_t len) const;
  uint64_t pos_ = 0;
  uint64_t word_ = 0;  // the claim word, turned into the commit word
  bool wake_ = false;  // the claim replaced a sleeping consumer's announcement
};

// A committed record at the consumer position, valid until Release.
class RecordView : public SplitBytes<const std::byte> {
 public:
  // Copies out of the payload at `offset`, hiding the wrap. Returns false and
  // copies nothing if [offset, offset + len) is outside the payload. Inline
  // as Reservation::Write.
  bool CopyOut(uint32_t offset, void* dst, uint32_t len) const {
    if (uint64_t{offset} + len > first_len_) return CopyOutSlow(offset, dst, len);
    // An empty copy may name no buffer at all; memcpy's pointers must never
    // be null, and the compiler may rely on that after the call.
    if (len != 0) std::memcpy(dst, first_ + offset, len);
    return true;
  }
  // CopyOut of a length known only at run time into a buffer that takes it
  // (the application's receive buffer): up to 64 bytes are copied inline, as
  // Reservation::Write does, instead of by a call into libc.
  bool CopyOutToBuffer(uint32_t offset, void* dst, uint32_t len) const {
    if (uint64_t{offset} + len > first_len_) return CopyOutSlow(offset, dst, len);
    if (len != 0) Reservation::CopySmall(static_cast<std::byte*>(dst), first_ + offset, len);
    return true;
  }

 private:
  friend class Ring;
  bool CopyOutSlow(uint32_t offset, void* dst, uint32_t len) const;
  uint64_t pos_ = 0;
  uint32_t nslots_ = 0;
};

class alignas(kCacheLine) Ring {
 public:
  // 2: consume_seen_; 3: the reserve word; 4: consumer_sleeping_ counts the
  // announced sleepers and commits wake consumers only (kWakeConsumer);
  // 5: sleep is announced in the reserve word, commits are release stores
  // (consumer_sleeping_ is gone); 6: a datagram record carries its GRH area,
  // built by the sender (transport/datagram_grh.h). Attach refuses any other
  // version, so processes of two library versions never share a ring.
  static constexpr uint32_t kVersion = 6;
  static constexpr uint32_t kMinSlots = 2;
  static constexpr uint32_t kMaxSlots = 1u << 24;    // 1 GiB of data
  static constexpr uint32_t kMaxRecordSlots = 4095;  // 12-bit field of the seq word
  static constexpr uint32_t kMinRecordSlots = 2;
  static constexpr uint32_t kRecordHeaderBytes = 8;
  // How long a reserved record may stay uncommitted before the consumer asks
  // whether its producer is still alive (and then again every such period).
  static constexpr int64_t kDeadProducerCheckNs = 100'000'000;

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Bytes a region needs for `slot_count` slots; 0 if slot_count is not a
  // power of two in [kMinSlots, kMaxSlots].
  static size_t RegionBytes(uint32_t slot_count);
  // Initialises a ring in place. nullptr if the region is too small or not
  // 64-byte aligned, or slot_count is invalid. Not concurrent-safe: format
  // before anyone else can Attach.
  static Ring* Format(void* region, size_t bytes, uint32_t slot_count);
  // Validates a formatted region (magic, version, geometry against `bytes`).
  static Ring* Attach(void* region, size_t bytes);

  uint32_t slot_count() const { return slot_count_; }
  // The seq word of a free slot in `lap` (see the layout above: tag only),
  // and the state bits of a committed record.
  static constexpr int kSeqTagShift = 36;
  static constexpr uint64_t kSeqStateMask = 3;
  static constexpr uint64_t kSeqCommitted = 2;
  static constexpr uint64_t FreeWordOfLap(uint64_t lap) { return lap << kSeqTagShift; }
  // Largest payload one record can carry.
  uint32_t MaxPayload() const;
  // Two at least: a record that fits one slot takes two, so that the line
  // after a record's first is its own (why in ring.cpp, TryProduce).
  static uint32_t SlotsFor(uint32_t payload_bytes) {
    const uint64_t used =
        (uint64_t{kRecordHeaderBytes} + payload_bytes + kSlotBytes - 1) / kSlotBytes;
    return static_cast<uint32_t>(std::max<uint64_t>(used, kMinRecordSlots));
  }

  // ---- producers (any thread of any process) ----
  // Reserves a record of `bytes` payload bytes. False if the ring lacks room
  // (nothing changed: retry after the consumer drains) or bytes > MaxPayload().
  bool TryReserve(uint32_t bytes, Reservation* r);
  // Publishes the record; wakes the consumer if its reservation took a
  // sleeping consumer's announcement (see "Sleep handshake" above). Inline:
  // two release stores on every record, no barrier.
  void Commit(const Reservation& r) {
    seq(r.pos_).store((r.word_ & ~kSeqStateMask) | kSeqCommitted, std::memory_order_release);
    // After the commit (see "helping" above): producers then need not look
    // at this record's seq word, the line the consumer polls.
    const uint32_t nslots = static_cast<uint32_t>((r.word_ >> 2) & kMaxRecordSlots);
    published_end_.store(r.pos_ + nslots, std::memory_order_release);
    if (r.wake_) [[unlikely]]
      Wake(kWakeConsumer);
    if (nslots > 2) PrefetchNextRecord(r.pos_ + nslots, nslots);
  }
  // Gives the reservation up (e.g. filling it failed): the consumer skips it.
  // Every reservation must end in Commit or Cancel, else the ring stalls.
  void Cancel(const Reservation& r);
  // Reserve + write hdr then payload + commit, in one call (a small record,
  // the common case, without a Reservation: see ring.cpp). False as
  // TryReserve.
  bool TryProduce(const void* hdr, uint32_t hdr_len, const void* payload, uint32_t payload_len);

  // ---- consumer (one thread at a time; serialise with the lock below) ----
  bool TryLockConsumer() {
    return consumer_lock_.load(std::memory_order_relaxed) == 0 &&
           consumer_lock_.exchange(1, std::memory_order_acquire) == 0;
  }
  void UnlockConsumer() { consumer_lock_.store(0, std::memory_order_release); }
  // Whether a consumer holds the lock now (a snapshot: it may be taken or
  // released right after).
  bool ConsumerLocked() const { return consumer_lock_.load(std::memory_order_relaxed) != 0; }

  // The record at the consumer position, if committed. Also skips records of
  // dead producers (see kDeadProducerCheckNs).
  bool Peek(RecordView* v);
  // Frees the record returned by the last Peek and moves past it.
  void Release(const RecordView& v);
  // Calls fn(const RecordView&) for up to `max` records, releasing each after
  // the call; publishes the consumer position once at the end (so producers
  // see the space only then: keep `max` modest). fn must not call Peek,
  // Release or ConsumeBatch. Returns the number of records consumed.
  template <typename Fn>
  size_t ConsumeBatch(size_t max, Fn&& fn);

  // Sleep protocol: w = PrepareToWait(); <checks of the caller's own>;
  // covered = AnnounceSleep(); if (!Peek(&v)) Sleep(w, covered ? t :
  // kUncoveredSleepNs); FinishSleep(). The wake word is taken first, so
  // that a Wake() after it ends the wait. Producers make a system call only
  // for an announcement (at most one per announcement). Without
  // AnnounceSleep the wait is a quiet one: producers' commits do not end
  // it, only Wake() or the timeout does. If the head record is reserved but
  // uncommitted, pass a timeout even when covered: a live producer's commit
  // wakes the consumer, a dead one never will, and only Peek notices that
  // it died.
  uint32_t PrepareToWait() const { return wake_word_.load(std::memory_order_seq_cst); }
  // Announces a sleep in the reserve word (see "Sleep handshake" above): the
  // first producer to reserve after it wakes one consumer after its commit.
  // True if the announcement covers every record not yet consumed, i.e.
  // nothing reserved before it is left; false if some record reserved
  // before it is still in the ring: if that one is not committed yet (the
  // head is not ready), its commit sends no wake-up, so sleep
  // kUncoveredSleepNs at most. Two threads of the owner may wait announced
  // at once (the progress thread and an application thread blocked for a
  // completion event): one announcement serves both, and the producer wakes
  // one of them, as any consumer will do.
  bool AnnounceSleep();
  // How long a consumer whose announcement did not cover every record
  // sleeps at most at first: a producer between its reservation and its
  // commit commits within a microsecond unless it was preempted (or died,
  // or was stopped: UncoveredSleeps, below, then lengthens the sleeps).
  static constexpr int64_t kUncoveredSleepNs = 50'000;
  enum class WakeReason { kWoken, kTimedOut, kInterrupted };
  // Who a wake-up is for (FUTEX_WAIT_BITSET): a commit wakes one waiter that
  // consumes (kWakeConsumer); the owner's kicks of its progress thread
  // (shutdown, timers, an application about to block) wake kWakeThread. The
  // progress thread waits for both unless an application thread consumes
  // in its place (transport/engine.cpp, "Blocking waits").
  static constexpr uint32_t kWakeConsumer = 1;
  static constexpr uint32_t kWakeThread = 2;
  // The owner's own wake-up of an application thread that consumes in the
  // progress thread's place, for an event token another thread wrote: it
  // must reach that thread, not a progress thread that waits for commits.
  static constexpr uint32_t kWakeEventWaiter = 4;
  // FUTEX_WAIT on the shared word while it equals `expected`, for wake-ups
  // that name one of `wake_bits`; timeout_ns < 0 waits without limit.
  WakeReason Sleep(uint32_t expected, int64_t timeout_ns = -1,
                   uint32_t wake_bits = kWakeConsumer | kWakeThread);
  // Ends an announced wait. The announcement stays in the reserve word until
  // the next reservation takes it (that producer then makes one futex call
  // that may find nobody waiting): taking it back would need to know that no
  // other thread of the owner still waits on it.
  void FinishSleep() {}

  // ---- observation (any process; approximate while producers run) ----
  uint64_t UsedSlots() const;
  // Slots reserved since the ring was formatted (records of every producer,
  // each counted by its slots): for tests and diagnostics.
  uint64_t ReservedSlots() const { return reserve_pos_.load(std::memory_order_acquire); }
  // The consumer position: slots the owner has read since the ring was
  // formatted. With ReservedSlots, tells a requester whether its responder
  // reads its ring at all (transport/completer.cpp, CheckTimers).
  uint64_t ConsumedSlots() const { return consume_pos_.load(std::memory_order_acquire); }

  // What the consumer would find at the head, without consuming (any thread
  // may ask): nothing, a record still being written (its commit wakes a
  // sleeping consumer; a dead writer is only noticed by Peek, so sleep with a
  // timeout), or a record ready to Peek. A record being written reads as
  // kEmpty until its claim is in its seq word (see PublishStalledClaim).
  enum class HeadState { kEmpty, kPending, kReady };
  HeadState Head() const;
  // The same, and the consumer position it describes (*pos), read so that
  // the two agree even while a consumer moves on: a watcher tells "the same
  // record is still waiting" from "another one arrived" by the position.
  HeadState Head(uint64_t* pos) const;
  // If the record at the head is reserved but neither committed nor claimed
  // in its seq word (its producer is between reserve and commit, and nobody
  // reserved after it), writes its claim there: Head() then says kPending
  // and Peek can tell whether that producer died. Any thread may call it; it
  // reads the producers' line, so not on every poll (consumers call it
  // before they sleep and about once per timer tick). True if it wrote.
  bool PublishStalledClaim();
  // Head() == kEmpty, inline for the busy-poll loop: two loads, the second
  // being the one line a producer writes to announce a record. A corrupt
  // head word reads as "not empty", and Head()/Peek then sort it out.
  // The head slot's data line is prefetched as well: a producer writes it
  // before it commits, so when the seq word says "committed" the record is
  // usually here already, instead of costing a second cross-core miss after
  // the first (ib_send_lat -s 8 on a 2-core VM: 0.63 -> 0.49 us). The
  // line after it too: a SEND of up to 72 bytes (56 bytes of ring and
  // transport headers) is a two-slot record, whose second line otherwise
  // came over only once the copy reached it (ib_send_lat -s 64, median and
  // minimum ~0.07 us lower; -s 8 unchanged).
  bool HeadEmpty() const {
    uint64_t lap = 0;
    return HeadWord(&lap) == FreeWordOfLap(lap);
  }
  // Head() == kReady, inline as HeadEmpty(): what an application's poll
  // drains. A record still being written is left for the next look: a drain
  // would find nothing in it, and would pay the consumer lock and a clock
  // read (Peek times pending records to notice dead producers).
  bool HeadReady() const {
    uint64_t lap = 0;
    const uint64_t w = HeadWord(&lap);
    return (w & kSeqStateMask) == kSeqCommitted && ((w ^ FreeWordOfLap(lap)) >> kSeqTagShift) == 0;
  }
  // Wakes one waiter that waits for `bits` (see kWakeConsumer), without
  // producing.
  void Wake(uint32_t bits = kWakeConsumer);
  uint64_t dead_records_skipped() const { return dead_skips_.load(std::memory_order_relaxed); }
  uint32_t wake_word() const { return wake_word_.load(std::memory_order_relaxed); }

 private:
  Ring(uint32_t slot_count, size_t region_bytes);

  // The seq array follows the header (inline: the busy-poll path reads it).
  std::atomic<uint64_t>* seq_words() const {
    auto* base = reinterpret_cast<std::byte*>(const_cast<Ring*>(this));
    return std::launder(reinterpret_cast<std::atomic<uint64_t>*>(base + sizeof(Ring)));
  }
  std::atomic<uint64_t>& seq(uint64_t pos) const { return seq_words()[pos & (slot_count_ - 1)]; }
  static size_t SeqArrayBytes(uint32_t slot_count) {
    return (size_t{slot_count} * sizeof(uint64_t) + kCacheLine - 1) / kCacheLine * kCacheLine;
  }
  // The slots follow the seq array.
  std::byte* data() const {
    auto* base = reinterpret_cast<std::byte*>(const_cast<Ring*>(this));
    return base + sizeof(Ring) + SeqArrayBytes(slot_count_);
  }
  uint64_t Lap(uint64_t pos) const { return pos >> slot_shift_; }
  // The seq word at the consumer position, and that position's lap.
  uint64_t HeadWord(uint64_t* lap) const {
    const uint64_t c = consume_pos_.load(std::memory_order_acquire);
    __builtin_prefetch(data() + (c & (slot_count_ - 1)) * kSlotBytes);
    __builtin_prefetch(data() + ((c + 1) & (slot_count_ - 1)) * kSlotBytes);
    *lap = Lap(c);
    // Acquire: the record's bytes, stored before its commit, are seen.
    return seq(c).load(std::memory_order_acquire);
  }
  template <typename View, typename Byte>
  void Locate(uint64_t pos, uint32_t len, View* v) const;
  // TryProduce through TryReserve, Write and Commit: every case its
  // straight path does not take.
  [[gnu::noinline]] bool TryProduceSlow(const void* hdr, uint32_t hdr_len, const void* payload,
                                        uint32_t payload_len);
  // Wake(), then true: TryProduce's wake-up as a jump.
  [[gnu::noinline]] bool WakeAfterCommit();
  // TryReserve's general case (stale positions, a full-looking ring, a lost
  // claim, helping), entered when its straight attempt did not succeed.
  [[gnu::noinline]] bool TryReserveLoop(uint32_t bytes, Reservation* r);
  // The claim: the 16-byte CAS of the reserve word (reserve_pos_,
  // last_claim_) from (pos, last) to (pos + n, claim) (ring.cpp).
  bool CasReserveWord(uint64_t pos, uint64_t last, uint64_t new_pos, uint64_t claim);
  // reserve_pos_ and the last_claim_ that goes with it (the claim word of
  // the record ending there; 0 before the first), read consistently.
  void ReadReserveWord(uint64_t* pos, uint64_t* last) const;
  // Makes sure `last`, the claim of the record ending at `end`, is in that
  // record's head seq word (see "helping" above).
  void PublishClaim(uint64_t end, uint64_t last);
  void FillReservation(uint64_t p, uint64_t mask, uint32_t slots, std::byte* slot_data,
                       uint32_t bytes, uint64_t claim, uint64_t last, Reservation* r) const;

  // The committed, uncancelled record that `w` (the seq word at `pos`)
  // announces, as PeekAt would return it, without its call: what a drain
  // finds almost every time. false = anything else: ask PeekAt.
  bool ViewCommitted(uint64_t pos, uint64_t w, RecordView* v) const {
    if ((w & kSeqStateMask) != kSeqCommitted ||
        ((w ^ FreeWordOfLap(Lap(pos))) >> kSeqTagShift) != 0)
      return false;
    const uint32_t n = static_cast<uint32_t>((w >> 2) & kMaxRecordSlots);
    if (n == 0 || n > slot_count_) return false;  // corrupt: PeekAt clamps it
    const size_t start = (pos & (slot_count_ - 1)) * kSlotBytes;
    uint32_t record[2];  // ring.cpp's RecordHeader: payload length, flags
    std::memcpy(record, data() + start, sizeof record);
    if (record[1] != 0) return false;  // cancelled
    const uint32_t len = std::min(record[0], n * kSlotBytes - kRecordHeaderBytes);
    const size_t room = size_t{slot_count_} * kSlotBytes - start - kRecordHeaderBytes;
    v->pos_ = pos;
    v->nslots_ = n;
    v->first_ = data() + start + kRecordHeaderBytes;
    v->second_ = data();
    v->first_len_ = static_cast<uint32_t>(std::min<size_t>(len, room));
    v->size_ = len;
    return true;
  }
  // Record at *cursor if committed; skipping dead producers' records moves
  // *cursor (their slots are already reset, the caller publishes *cursor).
  bool PeekAt(uint64_t* cursor, RecordView* v);
  bool SkipIfDead(uint64_t pos, uint64_t word);
  void ResetSlots(uint64_t pos, uint32_t nslots);
  // After the commit of a record of `nslots` slots ending at `end`: asks for
  // the lines of a next record of that size for writing (see ring.cpp).
  void PrefetchNextRecord(uint64_t end, uint32_t nslots) const;

  // Immutable after Format. magic_ is stored last so Attach never sees a
  // half-initialised header.
  std::atomic<uint64_t> magic_;
  uint32_t version_;
  uint32_t slot_count_;
  uint32_t slot_shift_;
  [[maybe_unused]] uint32_t pad0_ = 0;  // keeps region_bytes_ 8-byte aligned
  uint64_t region_bytes_;

  // Producers' line. reserve_pos_ and last_claim_ are the reserve word,
  // changed only together by one 16-byte CAS (so 16-byte aligned, in this
  // order). consume_seen_ is consume_pos_ as a producer last read it: a
  // lower bound that spares producers a read of the consumer's line (a cache
  // miss each time the consumer moved) until the ring looks full.
  // published_end_ is the end of a record whose commit is done (the last
  // one committed, give or take a race: any value it holds is such an end).
  alignas(kCacheLine) std::atomic<uint64_t> reserve_pos_;
  std::atomic<uint64_t> last_claim_;
  std::atomic<uint64_t> consume_seen_;
  std::atomic<uint64_t> published_end_;
  // Written by the consumer only, read by producers for the space check.
  alignas(kCacheLine) std::atomic<uint64_t> consume_pos_;
  // Wake-up: the futex word, moved by every Wake().
  alignas(kCacheLine) std::atomic<uint32_t> wake_word_;
  [[maybe_unused]] uint32_t pad2_ = 0;
  // Consumer-private state (protected by the consumer lock).
  alignas(kCacheLine) std::atomic<uint32_t> consumer_lock_;
  [[maybe_unused]] uint32_t pad1_ = 0;
  uint64_t stall_pos_ = 0;      // head position being watched for a dead producer
  int64_t stall_since_ns_ = 0;  // 0 = not watching
  std::atomic<uint64_t> dead_skips_;
};

// The sleeps of a consumer whose announcements do not cover a record
// reserved before them (AnnounceSleep false): kUncoveredSleepNs first, then
// twice as long each time the head is found at the same position, up to the
// caller's cap. A record that stays pending there (its producer SIGSTOPped,
// in a debugger, or preempted for long) would otherwise wake the consumer
// every kUncoveredSleepNs for as long as it stays (ring layout 5: ~6,000
// wake-ups a second of an idle progress thread; layout 4 looked every
// 100 ms); a producer that was only preempted commits within its next time
// slice, and the consumer then sleeps at most about twice that long.
class UncoveredSleeps {
 public:
  // The next sleep, the head being at `head_pos`.
  int64_t Next(uint64_t head_pos, int64_t cap_ns) {
    if (ns_ == 0 || head_pos != pos_) {
      pos_ = head_pos;
      ns_ = Ring::kUncoveredSleepNs;
    } else {
      ns_ = std::min(ns_ * 2, cap_ns);
    }
    return std::min(ns_, cap_ns);
  }
  // An announcement covered every record: the next uncovered one starts over.
  void Reset() { ns_ = 0; }

 private:
  uint64_t pos_ = 0;
  int64_t ns_ = 0;
};

template <typename Fn>
size_t Ring::ConsumeBatch(size_t max, Fn&& fn) {
  const uint64_t start = consume_pos_.load(std::memory_order_relaxed);
  uint64_t cursor = start;
  size_t done = 0;
  RecordView v;
  // One load of the seq word answers the two common cases inline: the slot
  // is free (after the last record of a batch) or holds a committed record.
  // Acquire, paired with the commit's release store.
  while (done < max) {
    const uint64_t w = seq(cursor).load(std::memory_order_acquire);
    if (w == FreeWordOfLap(Lap(cursor))) break;
    if (!ViewCommitted(cursor, w, &v) && !PeekAt(&cursor, &v)) break;
    // The next record's data line, if it is committed (a line still being
    // written is the producer's: asking for it would only take it away),
    // comes in while this record is handled instead of after.
    const uint64_t next = v.pos_ + v.nslots_;
    if ((seq(next).load(std::memory_order_relaxed) & kSeqStateMask) == kSeqCommitted)
      __builtin_prefetch(data() + (next & (slot_count_ - 1)) * kSlotBytes);
    fn(static_cast<const RecordView&>(v));
    if (v.nslots_ == 1)  // ResetSlots of one slot, inline
      seq(v.pos_).store(FreeWordOfLap(Lap(v.pos_) + 1), std::memory_order_relaxed);
    else
      ResetSlots(v.pos_, v.nslots_);
    cursor = v.pos_ + v.nslots_;
    ++done;
  }
  if (cursor != start) consume_pos_.store(cursor, std::memory_order_release);
  return done;
}

}  // namespace softrdma::shm
