#include "transport/engine.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/limits.h"
#include "host/unusable_shm.h"
#include "transport/roce/port_factory.h"
#include "transport/roce/roce_qp.h"
#include "transport/transport.h"
#include "transport/xrc.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/futex.h"
#include "util/log.h"

namespace softrdma {
namespace {

constexpr uint64_t kSegmentMagic = 0x31474553414d4453ull;  // "SDMASEG1"
// 2: exported extent table (registered memory mapped by peers); 3: request
// records may carry a piggybacked ACK (wire::kFlagAck), which an older peer
// would ignore; 4: ring version 4 (commits wake consumers only, announced
// sleepers counted); 5: ring version 5 (sleep announced in the reserve word,
// commits are plain release stores). Peers of different versions must not
// talk to each other.
constexpr uint32_t kSegmentVersion = 5;
constexpr size_t kHeaderBytes = 4096;
// While the application polls, the progress thread looks in once per window
// (see "The progress thread's states" above StartWatchWindow): the first window of
// a watch is this long ...
constexpr uint64_t kAppPollingTickNs = 1000000;  // 1 ms
// ... and each window in which the application polled and left nothing for
// the thread doubles the next, up to this. Every look is a wake-up, and on a
// host whose cores all run busy-polling applications a wake-up preempts one
// of them (ib_send_lat -s 64, two processes on two vCPUs: ~4,000 wake-ups a
// second per process with 1 ms windows and a 50 us second look). The
// retransmit timers no longer need these looks (AppWatch::timer_deadline),
// so the cap only bounds how long held-back ACKs and records left for the
// thread wait after the application stopped polling without arming a CQ:
// 16 ms, under the 67 ms of the usual timeout 14 (4 ms cost a steady ~250
// wake-ups a second).
constexpr uint64_t kAppPollingMaxTickNs = 16000000;  // 16 ms
// How long a committed record may wait at the head of the ring of a polling
// application before the thread concludes that it was left for it. A
// busy-polling application drains within a poll, well under a microsecond
// even when the record's lines must cross cores (~0.8 us in this VM's slow
// state); the margin covers a poll loop that does other work in between.
constexpr uint64_t kAppDrainGraceNs = 20000;  // 20 us
// Wake-ups, while announced on the ring, that found the records drained by
// the application itself, before the watch goes quiet again.
constexpr uint32_t kAppDrainsBeforeQuiet = 16;
// Period of the retransmit-timer check while sends are outstanding.
constexpr uint64_t kTimerTickNs = 5000000;  // 5 ms
// A posted timer due time (TimerDueBy) wakes a sleeping progress thread only
// if its sleep would end later than this past it: one that wakes about then
// anyway is left alone.
constexpr uint64_t kTimerDueSlackNs = 200000;  // 200 us
constexpr int kDrainBatch = 64;
constexpr uint32_t kPollsBeforeBusyPolling = 256;
// How often the progress thread polls the RoCE port while a QP uses it and
// the application does not poll.
constexpr uint64_t kRocePollNs = 1000000;  // 1 ms
// After this many empty polls of the RoCE port in a row, verbs calls look
// only at every kRoceIdlePollStride-th call (a few microseconds of latency
// at most for a busy poller; the progress thread's looks are not thinned).
// The calls in between pass inline (Engine::RoceLookDue); the one that
// comes reads the clock and makes two calls, ~0.1 us, so 32 rather than 16:
// UCX polls four CQs per progress (its rc_verbs and ud_verbs send and
// receive CQs), all with the port idle, and spent ~9 % of a 4 KiB tag_bw
// sender's time in PollRoce and the clock with 16 and no inline pass.
// 32 calls of a poll loop that does ~0.5 us of work each add ~16 us at
// most to the spacing of the looks below.
constexpr uint32_t kRoceIdlePolls = 1024;
constexpr uint32_t kRoceIdlePollStride = 32;
// ... and, of those, only one per kRoceIdleLookNs actually looks: a look is
// two system calls (~1 us), and a busy poller's calls come every few tens of
// nanoseconds, so a stride of calls alone left it in the kernel most of the
// time (ibv_ud_pingpong on one host: ~2.4 epoll_wait + recvmmsg per round
// trip in the client). A RoCE peer that wakes an idle port waits this long
// at most for the first datagram; then the port is looked at on every call.
constexpr uint64_t kRoceIdleLookNs = 20000;  // 20 us
// The longer the port has been silent, the rarer those looks: one per
// sixteenth of the time it has been empty (since its kRoceIdlePolls-th empty
// poll in a row), from kRoceIdleLookNs up to kRoceIdleLookMaxNs. A shm
// program whose UD QPs only listen on the wire (ibv_ud_pingpong between two
// processes of one host) then looks every 250 us instead of every 20 us
// (each look is ~1 us of system calls on the round trip it falls in), while
// a RoCE peer that breaks a silence of T waits at most T/16 (and 250 us)
// more for its first datagram; once one arrives, every call looks again.
constexpr uint64_t kRoceIdleLookMaxNs = 250000;  // 250 us
constexpr uint64_t kRoceIdleLookShift = 4;       // 1/16 of the silence
// Datagrams taken from the RoCE port per poll.
constexpr int kRocePollBatch = 64;
// Batches a settle (Engine::SettleRoce) takes at most: 4096 datagrams, a few
// milliseconds; what a peer still sends after that meets a stopped QP, as
// it would on a NIC.
constexpr int kRoceSettleBatches = 64;
// After a look at the RoCE port that found datagrams, the progress thread
// waits this long in ppoll() on the port's fd before its usual sleep: a
// stream's next burst then costs it one wake-up, not the ~5 context switches
// of a sleep on the ring through the fd watcher (arming it, its poll(), its
// wake-up of this thread). Meanwhile the shm ring is not watched (its commits
// wait at most this long) and nothing is spent: the thread is blocked.
constexpr uint64_t kRoceLingerNs = 50000;  // 50 us
// How long datagrams may wait on the RoCE port of a polling application
// before the progress thread concludes that they were left for it (see
// Engine::WatchRocePort): a busy poller whose port went idle looks once per
// kRoceIdleLookNs, so this is that with a margin for a poll loop that does
// other work in between.
constexpr uint64_t kRoceAppGraceNs = 50000;  // 50 us
// Wake-ups of a watch on the port that found it emptied by the application,
// since the thread's last take, before the watch leaves the port alone: a
// busy poller pays this many wake-ups at most (a few milliseconds' worth).
constexpr uint32_t kRoceEmptyWakesBeforeQuiet = 256;
// Batches the watch takes at once from a port whose datagrams were left.
constexpr int kRoceWatchBatches = 4;
// How often a record stuck half-written at the head of the ring is looked at.
constexpr uint64_t kPendingRecheckNs = 100000000;  // 100 ms
// How often work blocked on a full peer ring is retried by the thread.
constexpr uint64_t kBlockedRetryNs = 200000;  // 200 us
// How long a QP being destroyed (or a process exiting) waits for room in a
// requester's ring for the ACK it owes (Engine::SendOwed). A live peer's
// progress thread drains its ring within a tick (about a millisecond) even
// on a busy host; one that has not in this time is stopped or stuck, and its
// own retransmit timer decides for it.
constexpr uint64_t kOwedAckWaitNs = 100000000;  // 100 ms
// SendOwed's back-off between tries: yields first (the peer drains from
// another core within microseconds), then sleeps, doubling up to a cap.
constexpr int kOwedAckYields = 16;
constexpr uint64_t kOwedAckSleepMinNs = 10000;    // 10 us
constexpr uint64_t kOwedAckSleepMaxNs = 1000000;  // 1 ms

// The head of each process's shared segment; peers validate it on attach.
struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t pid;
  uint64_t mr_offset;
  uint64_t extent_offset;
  uint64_t ring_offset;
  uint64_t ring_bytes;
  // Looks at the RoCE port so far (PeerLink::roce_polls). Added to layout 4
  // without a new version: a segment of a build before it has 0 here, which
  // readers take as "not counted".
  uint64_t roce_polls;
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes);

std::mutex g_engine_mutex;

// Waiting for the ring's consumer lock, which is only ever held for one
// drain: spin briefly, then yield (two threads may share one core).
void Backoff(int spins) {
  if (spins > 64)
    sched_yield();
  else
    __builtin_ia32_pause();
}

}  // namespace

void EngineAtExit();
void EngineAfterFork();

Engine* Engine::Create(Status* err) {
  std::lock_guard<std::mutex> lock(g_engine_mutex);
  if (Engine* e = current_.load(std::memory_order_acquire)) return e;
  static bool hooks_installed = false;
  if (!hooks_installed) {
    hooks_installed = true;
    atexit(EngineAtExit);
    pthread_atfork(nullptr, nullptr, EngineAfterFork);
  }
  auto* engine = new Engine();
  Status s = engine->Init();
  if (!s.ok()) {
    // Printed whatever SOFTRDMA_LOG says: the errno alone (EPROTO, EACCES)
    // would not tell the user which file is in the way or what to do.
    ReportToUser("cannot open softrdma0: %s", s.message().c_str());
    if (err) *err = s;
    delete engine;
    return nullptr;
  }
  current_.store(engine, std::memory_order_release);
  return engine;
}

void EngineAtExit() {
  std::lock_guard<std::mutex> lock(g_engine_mutex);
  Engine* e = Engine::current_.load(std::memory_order_acquire);
  if (e && e->owner_pid_ == getpid()) e->Shutdown();
}

// The child of a fork gets a copy of the parent's memory but none of its
// threads, and must not touch the parent's segment: it starts afresh (with
// its own registry slot) the next time it uses a device.
void EngineAfterFork() {
  if (Engine* engine = Engine::current_.load(std::memory_order_relaxed)) {
    MemoryExporter::PrivatizeAfterFork();
    engine->exporter_->ForgetAfterFork();
  }
  Engine::current_.store(nullptr, std::memory_order_relaxed);
}

void Engine::OnReclaim(ProcRef dead) {
  // The previous holder of our slot died without cleaning up: its segment
  // (ring + MR table) is ours to remove.
  shm::ShmRegion::Unlink(Registry::ProcSegmentName(dead));
}

Status Engine::Init() {
  owner_pid_ = getpid();
  // Allow peers of the same user to read/write our memory with
  // process_vm_readv/writev even under Yama ptrace_scope=1. Where it is still
  // refused the transport falls back to the two-copy path.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);

  Status s = Registry::Open(&registry_);
  if (!s.ok()) return s;
  s = registry_.AttachProcess(&me_, &Engine::OnReclaim);
  if (!s.ok()) return s;

  const Config& cfg = GetConfig();
  const size_t mr_bytes = (MrTable::Bytes() + 4095) & ~size_t{4095};
  const size_t extent_bytes = (sizeof(ExtentTable) + 4095) & ~size_t{4095};
  const size_t ring_bytes = shm::Ring::RegionBytes(cfg.ring_slots);
  const size_t total = kHeaderBytes + mr_bytes + extent_bytes + ring_bytes;
  const std::string name = Registry::ProcSegmentName(me_);
  shm::ShmRegion::Unlink(name);  // a leftover of a dead process with our (slot, gen)
  s = shm::ShmRegion::Create(name, total, &segment_);
  if (!s.ok()) {
    registry_.DetachProcess(me_);
    // EEXIST: the Unlink above could not remove a file of that name (another
    // user's, in the sticky /dev/shm).
    if (s.code() == EEXIST || s.code() == EACCES || s.code() == EPERM)
      return Status::Error(s.code(), UnusableShm(name, "is in the way of this process's segment (" +
                                                           std::string(strerror(s.code())) + ")"));
    return Status::Error(
        s.code(), "cannot make this process's segment " + ShmPath(name) + ": " + s.message());
  }
  auto* base = static_cast<uint8_t*>(segment_.data());
  auto* hdr = reinterpret_cast<SegmentHeader*>(base);
  hdr->pid = getpid();
  hdr->mr_offset = kHeaderBytes;
  hdr->extent_offset = kHeaderBytes + mr_bytes;
  hdr->ring_offset = hdr->extent_offset + extent_bytes;
  hdr->ring_bytes = ring_bytes;
  roce_polls_word_ = &hdr->roce_polls;
  mr_table_ = std::make_unique<MrTable>(reinterpret_cast<MrEntry*>(base + hdr->mr_offset));
  exporter_ =
      std::make_unique<MemoryExporter>(reinterpret_cast<ExtentTable*>(base + hdr->extent_offset));
  ring_ = shm::Ring::Format(base + hdr->ring_offset, ring_bytes, cfg.ring_slots);
  if (!ring_) {
    shm::ShmRegion::Unlink(name);
    registry_.DetachProcess(me_);
    return Status::Error(EINVAL, "cannot format the inbound ring");
  }
  hdr->version = kSegmentVersion;
  __atomic_store_n(&hdr->magic, kSegmentMagic, __ATOMIC_RELEASE);

  qp_by_qpn_.reset(new std::atomic<Qp*>[kQpnTableSize]());
  thread_ = std::thread([this] { ThreadMain(); });
  SOFTRDMA_LOG(kInfo, "attached as process slot %u gen %u, segment %s", me_.slot, me_.gen,
               name.c_str());
  return Status::Ok();
}

Engine::~Engine() = default;

void Engine::Shutdown() {
  death_watch_.Stop();
  stop_.store(true);
  StopRoceWatch();
  if (thread_.joinable()) {
    ring_->Wake(shm::Ring::kWakeThread);  // the thread waits on the ring's word, whatever its state
    thread_.join();
  }
  // The UDP socket of the RoCE wire may hold datagrams that the kernel gave
  // us for another process of ours (SO_REUSEPORT: any member of the group
  // may get any datagram, e.g. a peer's last ACK); the port forwards them
  // to their owner as it reads them (ForwardingPort), and would otherwise
  // lose them with our socket at exit. Never opens a port only for this.
  // Ours are dropped unread: nothing new is executed once exit began, on
  // either wire (docs/design.md "Process exit"): the application's memory
  // and the fds its CQs notify may be gone. Their requesters get no answer,
  // as from a process that died.
  if (roce_port_ready_.load(std::memory_order_acquire) && roce_port_) {
    ReadRocePortEmpty(/*execute=*/false);
    transport::roce::LogCounters(roce_port_.get());
  }
  // ACKs still held back are owed to peers that may be waiting for them.
  if (ring_->TryLockConsumer()) {
    FlushAcks();
    ring_->UnlockConsumer();
  }
  // Those that found the requester's ring full (queued for the service that
  // no longer runs) get SendOwed's bounded wait: once we are gone, the
  // requester's retransmissions find no QP and its messages fail although
  // we executed them. Nothing new is executed now (the application may have
  // closed the fds its CQs notify), so our ring is not drained meanwhile.
  {
    std::shared_lock<std::shared_mutex> map_lock(qp_map_mutex_);
    for (Qp* qp : live_qps_) SendOwed(*qp, /*drain_own_ring=*/false);
  }
  // What a fault-injecting port still delays (the ACKs just sent among them)
  // is in flight on the wire: it goes now, not with our memory.
  if (roce_port_ready_.load(std::memory_order_acquire) && roce_port_) roce_port_->FlushHeld();
  shm::ShmRegion::Unlink(Registry::ProcSegmentName(me_));
  registry_.DetachProcess(me_);
  // The RoCE wire's counters at exit, for the loss tests and their reports.
  if (const char* stats = getenv("SOFTRDMA_ROCE_STATS");
      stats && strcmp(stats, "1") == 0 && roce_port_ready_.load(std::memory_order_acquire))
    fprintf(stderr, "softrdma[%d] roce: %s\n", int(getpid()),
            transport::roce::FormatCounters().c_str());
}

Status Engine::RegisterQp(Qp* qp, uint32_t* qpn) {
  {
    // max_qp, as the device reports it (the QPN table is host-wide).
    std::shared_lock<std::shared_mutex> lock(qp_map_mutex_);
    if (live_qps_.size() >= static_cast<size_t>(limits::kMaxQp))
      return Status::Error(ENOMEM, "max_qp QPs exist already in this process");
  }
  Status s = registry_.AllocQpn(me_, qpn);
  if (!s.ok()) return s;
  std::unique_lock<std::shared_mutex> lock(qp_map_mutex_);
  qp_by_qpn_[registry_.IndexOf(*qpn)].store(qp, std::memory_order_release);
  qp->live_index = static_cast<uint32_t>(live_qps_.size());
  live_qps_.push_back(qp);
  return Status::Ok();
}

void Engine::UnregisterQp(Qp* qp) {
  uint32_t qpn = qp->verbs()->qp_num;
  // What reached our ring before the destroy is executed and acknowledged,
  // as a NIC executes the packets it received before the destroy command:
  // the application may have stopped polling (and the progress thread not
  // yet noticed) with messages for the QP waiting in the ring, and their
  // requester must not be told "no such QP" for messages that arrived in
  // time. From then on the QP executes nothing (RESET: requests are dropped
  // while what it owes is on its way, and its own sends are not retried).
  if (qp->type == IBV_QPT_UD) {
    // A UD QP owes no requester anything, so a QP being destroyed takes no
    // more datagrams: the buffers of its receive WQEs may be gone already
    // (UCX's ud_verbs frees them before it destroys the QP; an HCA survives
    // that because registered pages stay pinned, docs/design.md "UD").
    std::lock_guard<SpinLock> qlock(qp->lock);
    qp->state = IBV_QPS_RESET;
    qp->qpx.qp_base.state = IBV_QPS_RESET;
  }
  // The same for what reached the RoCE port: executed and acknowledged
  // before the QP stops (an RC requester whose last messages sit unread in
  // our socket would otherwise retransmit them into nothing).
  if (roce_active_.load(std::memory_order_acquire)) SettleRoce();
  for (int spins = 0; !ring_->TryLockConsumer(); ++spins) Backoff(spins);
  DrainArrived();
  {
    std::lock_guard<SpinLock> qlock(qp->lock);
    qp->state = IBV_QPS_RESET;
    qp->qpx.qp_base.state = IBV_QPS_RESET;
  }
  ring_->UnlockConsumer();
  SendOwed(*qp, /*drain_own_ring=*/true);
  {
    std::unique_lock<std::shared_mutex> lock(qp_map_mutex_);
    const uint32_t index = registry_.IndexOf(qpn);
    if (index < kQpnTableSize && qp_by_qpn_[index].load(std::memory_order_relaxed) == qp)
      qp_by_qpn_[index].store(nullptr, std::memory_order_release);
    // Swap with the last: destroying many QPs stays linear overall.
    if (qp->live_index < live_qps_.size() && live_qps_[qp->live_index] == qp) {
      live_qps_[qp->live_index] = live_qps_.back();
      live_qps_[qp->live_index]->live_index = qp->live_index;
      live_qps_.pop_back();
    }
  }
  // A drain dispatches under the ring's consumer lock and takes no other
  // lock that we hold. Once we have held the consumer lock after clearing
  // the entry, no drain can still use the QP; the ACK list (kept across
  // drains) must forget it too. (Nothing is owed any more: SendOwed sent it
  // or gave up, and a QP in RESET acquires no new debt.)
  for (int spins = 0; !ring_->TryLockConsumer(); ++spins) Backoff(spins);
  std::erase(ack_list_, qp);
  ring_->UnlockConsumer();
  // Likewise the RoCE receive side: a poll that found the QP has finished.
  if (roce_active_.load(std::memory_order_acquire)) {
    roce_rx_lock_.lock();
    roce_rx_lock_.unlock();
  }
  // Only now: a drain that ran before we held the consumer lock (an ACK its
  // flush could not send, a response waiting for ring space) may have queued
  // the QP for service again. The map lock keeps a ServiceQps pass (which
  // may re-queue the QPs it serves) from running meanwhile.
  {
    std::unique_lock<std::shared_mutex> lock(qp_map_mutex_);
    std::lock_guard<SpinLock> slock(service_lock_);
    std::erase(service_list_, qp);
    qp->in_service_list = false;
  }
  registry_.FreeQpn(me_, qpn);
}

void Engine::DrainArrived() {
  // At most a ring's worth of records (each takes a slot or more): a peer
  // that keeps sending cannot hold the destroy here.
  uint64_t budget = ring_->slot_count();
  while (budget > 0) {
    const size_t n = DispatchBatch();
    if (n == 0) break;
    budget -= std::min<uint64_t>(budget, n);
  }
  // Including the ACKs an earlier drain held back: the application that
  // would have carried them on its next request is tearing down.
  acks_deferred_.store(false, std::memory_order_relaxed);
  FlushAcks();
}

void Engine::SettleBeforeError() {
  if (roce_active_.load(std::memory_order_acquire)) SettleRoce();
  for (int spins = 0; !ring_->TryLockConsumer(); ++spins) Backoff(spins);
  DrainArrived();
  ring_->UnlockConsumer();
}

void Engine::SendOwed(Qp& qp, bool drain_own_ring) {
  uint64_t deadline = 0;
  for (int round = 0;; ++round) {
    std::shared_ptr<PeerLink> peer;
    {
      std::lock_guard<SpinLock> lock(qp.lock);
      // READ/atomic responses first: an ACK must not overtake them.
      if (!qp.responses.empty()) transport::FlushResponses(*this, qp);
      if (qp.ack_pending && qp.responses.empty()) transport::SendAck(*this, qp);
      if (!qp.peer) return;  // nobody to answer (SendAck and FlushResponses gave up too)
      if (!qp.ack_pending && qp.responses.empty()) {
        if (qp.peer->owed_acks_stalled.load(std::memory_order_relaxed))
          qp.peer->owed_acks_stalled.store(false, std::memory_order_relaxed);  // it drains again
        return;
      }
      peer = qp.peer;
    }
    const uint64_t now = NowNs();
    if (round == 0) deadline = now + kOwedAckWaitNs;
    if (now >= deadline || peer->owed_acks_stalled.load(std::memory_order_relaxed)) {
      peer->owed_acks_stalled.store(true, std::memory_order_relaxed);
      SOFTRDMA_LOG(kWarn,
                   "QP %u: destroyed with an ACK owed to pid %d, whose ring stayed full; "
                   "its last messages will fail",
                   qp.verbs()->qp_num, static_cast<int>(peer->pid));
      return;
    }
    if (registry_.LivePid(peer->ref) == 0) return;  // gone: nobody to tell
    // Our own ring must keep moving meanwhile: the requester may be waiting
    // for room in it (destroying a QP of its own, say) before it drains its
    // ring. The progress thread drains too, but may be watching an
    // application that no longer polls for up to a window.
    if (drain_own_ring) DrainRing(/*by_app=*/false);
    if (round < kOwedAckYields) {
      sched_yield();
    } else {
      const uint64_t ns =
          std::min(kOwedAckSleepMaxNs, kOwedAckSleepMinNs << std::min(round - kOwedAckYields, 10));
      const timespec ts{0, static_cast<long>(ns)};
      nanosleep(&ts, nullptr);
    }
  }
}

std::shared_ptr<PeerLink> Engine::ResolveQpn(uint32_t qpn) {
  ProcRef owner;
  if (!registry_.QpnOwner(qpn, &owner)) return nullptr;
  {
    // A process we are linked to was alive when we linked: connecting more
    // QPs to it needs no new liveness check (kill + /proc read, ~10 us).
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto it = peers_.find(owner.slot);
    if (it != peers_.end() && it->second->ref == owner) return it->second;
  }
  if (registry_.LivePid(owner) == 0) return nullptr;
  return Peer(owner);
}

std::shared_ptr<PeerLink> Engine::Peer(ProcRef ref) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  auto it = peers_.find(ref.slot);
  if (it != peers_.end() && it->second->ref == ref) return it->second;
  auto link = std::make_shared<PeerLink>();
  link->ref = ref;
  if (ref == me_) {
    // Loopback between QPs of this process: our own ring.
    link->pid = getpid();
    link->ring = ring_;
    link->mrs =
        reinterpret_cast<const MrEntry*>(static_cast<uint8_t*>(segment_.data()) + kHeaderBytes);
    link->roce_polls = roce_polls_word_;
  } else {
    link->pid = registry_.LivePid(ref);
    if (link->pid == 0) return nullptr;
    const std::string name = Registry::ProcSegmentName(ref);
    const std::string restart = "pid " + std::to_string(link->pid) +
                                " cannot be reached: restart it, or run this process in another "
                                "SOFTRDMA_NAMESPACE";
    Status s = shm::ShmRegion::Open(name, &link->region);
    // Missing or still empty: the owner is between attaching to the
    // registry and making its segment; the next look finds it.
    if (s.code() == ENOENT || s.code() == EINVAL) return nullptr;
    if (!s.ok())
      return RefusePeer(ref, link->pid, std::string("cannot be opened: ") + strerror(s.code()),
                        restart);
    auto* base = static_cast<uint8_t*>(link->region.data());
    auto* hdr = reinterpret_cast<SegmentHeader*>(base);
    if (link->region.size() < kHeaderBytes) return nullptr;  // being sized
    const uint64_t magic = __atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE);
    if (magic == 0) return nullptr;  // not (yet) a softrdma segment: the owner is still starting
    if (magic != kSegmentMagic)
      return RefusePeer(ref, link->pid, "is damaged (not a softrdma segment header)", restart);
    if (hdr->version != kSegmentVersion) {
      // Otherwise this shows only as a peer that never answers.
      return RefusePeer(ref, link->pid,
                        "belongs to a process of another softrdma version (segment layout " +
                            std::to_string(hdr->version) + ", this library uses " +
                            std::to_string(kSegmentVersion) +
                            "): processes of different softrdma builds cannot talk",
                        "run both with the same build, or give each build its own "
                        "SOFTRDMA_NAMESPACE");
    }
    // Checked without overflow: a damaged header may hold any values.
    const uint64_t size = link->region.size();
    auto fits = [size](uint64_t offset, uint64_t bytes) {
      return offset <= size && bytes <= size - offset;
    };
    if (!fits(hdr->ring_offset, hdr->ring_bytes) ||
        !fits(hdr->extent_offset, sizeof(ExtentTable)) || !fits(hdr->mr_offset, MrTable::Bytes()))
      return RefusePeer(ref, link->pid, "is damaged (smaller than its header says)", restart);
    link->ring = shm::Ring::Attach(base + hdr->ring_offset, hdr->ring_bytes);
    if (!link->ring)
      return RefusePeer(ref, link->pid, "is damaged (its ring is not a valid ring)", restart);
    link->mrs = reinterpret_cast<const MrEntry*>(base + hdr->mr_offset);
    link->roce_polls = &hdr->roce_polls;
    if (GetConfig().map_mr)
      link->mappings = std::make_unique<transport::PeerMappings>(
          link->pid, reinterpret_cast<const ExtentTable*>(base + hdr->extent_offset));
  }
  peers_[ref.slot] = link;
  if (!(ref == me_)) death_watch_.Watch(link);
  return link;
}

std::shared_ptr<PeerLink> Engine::RefusePeer(ProcRef ref, pid_t pid, const std::string& reason,
                                             const std::string& fix) {
  if (refused_peers_.insert({ref.slot, ref.gen}).second)
    ReportToUser("%s", UnusableShm(Registry::ProcSegmentName(ref),
                                   "segment of pid " + std::to_string(pid) + " " + reason, fix)
                           .c_str());
  return nullptr;
}

// A header and at most one payload piece (every ACK, every small SEND): one
// call that reserves, writes and commits (Ring::TryProduce, straight-line
// for a small record), without an iovec array and SendGather's loops.
bool Engine::Send(PeerLink& peer, const wire::RecordHeader& hdr, const void* payload,
                  uint32_t len) {
  return peer.ring->TryProduce(&hdr, sizeof hdr, payload, len);
}

bool Engine::SendGather(PeerLink& peer, const wire::RecordHeader& hdr, const iovec* parts,
                        int nparts) {
  // parts[0] is the header (by the callers' convention): two parts or fewer
  // take Send's direct path.
  if (nparts <= 2 && parts[0].iov_base == &hdr && parts[0].iov_len == sizeof hdr)
    return Send(peer, hdr, nparts == 2 ? parts[1].iov_base : nullptr,
                nparts == 2 ? static_cast<uint32_t>(parts[1].iov_len) : 0);
  uint32_t bytes = 0;
  for (int i = 0; i < nparts; ++i) bytes += static_cast<uint32_t>(parts[i].iov_len);
  shm::Reservation r;
  if (!peer.ring->TryReserve(bytes, &r)) return false;
  uint32_t off = 0;
  for (int i = 0; i < nparts; ++i) {
    r.Write(off, parts[i].iov_base, static_cast<uint32_t>(parts[i].iov_len));
    off += static_cast<uint32_t>(parts[i].iov_len);
  }
  peer.ring->Commit(r);
  return true;
}

void Engine::CountPollAfterArm() {
  // An application that armed a CQ polls a few times to drain it and then
  // blocks; only a long run of polls without arming means it busy-polls.
  if (++polls_since_arm_ > kPollsBeforeBusyPolling)
    app_may_block_.store(false, std::memory_order_relaxed);
}

void Engine::ProgressSlow() {
  DrainRing(/*by_app=*/true);
  if (RoceLookDue()) PollRoce(/*by_app=*/true);
  if (service_pending_.load(std::memory_order_relaxed)) {
    uint64_t next = 0;
    ServiceQps(NowNs(), &next);
  }
}

bool Engine::DrainRing(bool by_app) {
  // The application drains committed records only; the progress thread
  // also looks at one still being written, to notice a dead producer.
  if (by_app ? !ring_->HeadReady() : ring_->HeadEmpty()) return false;
  if (!ring_->TryLockConsumer()) return false;
  // ACKs an earlier drain held back go first (a stream of requests keeps
  // its ACKs flowing); most were carried by a request meanwhile.
  if (acks_deferred_.load(std::memory_order_relaxed)) {
    acks_deferred_.store(false, std::memory_order_relaxed);
    FlushAcks();
  }
  // No QP map lock: see qp_by_qpn_. The consumer position is published once
  // per batch, so producers' space checks see one store, not one per record.
  const size_t n = DispatchBatch();
  // The application's own drain may keep this batch's ACKs for its next
  // request (responder.cpp, "Deferred ACKs").
  if (!ack_list_.empty() && (!by_app || n == 0 || !DeferAcks())) FlushAcks();
  ring_->UnlockConsumer();
  return n > 0;
}

bool Engine::FlushDeferredAcks() {
  if (!acks_deferred_.load(std::memory_order_relaxed)) return true;
  if (!ring_->TryLockConsumer()) return false;
  acks_deferred_.store(false, std::memory_order_relaxed);
  FlushAcks();
  ring_->UnlockConsumer();
  return true;
}

// Called by the application's drain, holding the consumer lock. Deferring is
// allowed only while the progress thread runs or watches a polling
// application (it then looks in within about a tick and flushes). Before any
// other sleep the thread announces it and then takes the consumer lock once
// (FlushAcksBeforeSleep): a drain that held the lock before sees the thread
// running and defers, and the thread then finds its ACKs; a drain after it
// sees the announcement and flushes. The lock orders the two sides, so this
// hot side needs no fence (a locked store here drained the store buffer,
// full of the drain's stores to lines the producers share).
bool Engine::DeferAcks() {
  const uint32_t state = thread_state_.load(std::memory_order_relaxed);
  if (state != kRunning && state != kAppPolling) return false;
  acks_deferred_.store(true, std::memory_order_relaxed);
  return true;
}

void Engine::FlushAcksBeforeSleep() {
  for (int spins = 0; !ring_->TryLockConsumer(); ++spins) Backoff(spins);
  if (acks_deferred_.load(std::memory_order_relaxed)) {
    acks_deferred_.store(false, std::memory_order_relaxed);
    FlushAcks();
  }
  ring_->UnlockConsumer();
}

size_t Engine::DispatchBatch() {
  Qp* held = nullptr;
  const size_t n = ring_->ConsumeBatch(
      kDrainBatch, [this, &held](const shm::RecordView& view) { Dispatch(view, &held); });
  if (held) held->lock.unlock();
  return n;
}

void Engine::Dispatch(const shm::RecordView& view, Qp** held) {
  wire::RecordHeader hdr;
  if (view.size() < sizeof hdr) return;  // malformed: drop
  view.CopyOut(0, &hdr, sizeof hdr);
  Qp* qp = LocalQp(hdr.dst_qpn);
  // The lock of the previous record's QP is kept only for the same QP: other
  // paths take locks of their own, and must not while holding another's.
  if (*held != qp) {
    if (*held) (*held)->lock.unlock();
    *held = nullptr;
    if (qp) {
      qp->lock.lock();
      *held = qp;
    }
  }
  if (!qp) {
    // Addressed to an XRC SRQ of ours (its number is not a QP's).
    if (hdr.type == wire::RecordType::kXrcForward) {
      transport::OnXrcForward(*this, hdr, view);
      return;
    }
    if (wire::IsRequest(hdr.type)) {
      // No such QP here. A NIC would drop the packet and let the requester
      // time out; we tell it at once, so that it need not retry, but it
      // still reports the failure only when its timer expires (completer.cpp,
      // OnAck). A destroy drains the ring first (UnregisterQp): only
      // requests that arrived after it get here.
      if (auto peer = Peer(ProcRef{hdr.src_slot, hdr.src_gen}))
        transport::SendNakNoQp(*this, *peer, hdr);
    }
    return;
  }
  if (wire::IsRequest(hdr.type)) {
    if (hdr.flags & wire::kFlagAck) transport::OnPiggybackedAck(*this, *qp, hdr);
    if (transport::OnRequest(*this, *qp, hdr, view) && !qp->ack_pending) {
      qp->ack_pending = true;
      ack_list_.push_back(qp);
    }
  } else if (hdr.type == wire::RecordType::kAck) {
    transport::OnAck(*this, *qp, hdr);
  } else if (hdr.type == wire::RecordType::kDatagram) {
    transport::OnDatagram(*this, *qp, hdr, view);
  } else if (hdr.type == wire::RecordType::kXrcDone) {
    // An XRC message handed to another process was placed (or not).
    if (transport::OnXrcDone(*this, *qp, hdr) && !qp->ack_pending) {
      qp->ack_pending = true;
      ack_list_.push_back(qp);
    }
  } else {
    transport::OnOneSidedResponse(*this, *qp, hdr, view);  // READ/atomic responses
  }
}

void Engine::FlushAcks() {
  for (Qp* qp : ack_list_) {
    std::lock_guard<SpinLock> lock(qp->lock);
    // Already carried by a request (PiggybackAck) or dropped by a reset.
    if (!qp->ack_pending) continue;
    if (!transport::SendAck(*this, *qp)) NeedService(qp);  // requester's ring full
  }
  ack_list_.clear();
}

void Engine::NeedService(Qp* qp) {
  std::lock_guard<SpinLock> lock(service_lock_);
  if (!qp->in_service_list) {
    qp->in_service_list = true;
    service_list_.push_back(qp);
  }
  service_pending_.store(true, std::memory_order_release);
}

// Retries QPs that waited for ring space or an RNR timer. Requires the QP
// map to be stable: callers hold no QP lock.
bool Engine::ServiceQps(uint64_t now, uint64_t* next_deadline) {
  std::shared_lock<std::shared_mutex> map_lock(qp_map_mutex_);
  std::vector<Qp*> work;
  {
    std::lock_guard<SpinLock> lock(service_lock_);
    work.swap(service_list_);
    for (Qp* qp : work) qp->in_service_list = false;
    service_pending_.store(false, std::memory_order_relaxed);
  }
  bool did = false;
  for (Qp* qp : work) {
    std::lock_guard<SpinLock> lock(qp->lock);
    uint64_t deadline = 0;
    did |= transport::Service(*this, *qp, now, &deadline);
    if (deadline && (!*next_deadline || deadline < *next_deadline)) *next_deadline = deadline;
  }
  return did;
}

bool Engine::CheckTimers(uint64_t now, uint64_t* next_deadline) {
  // A RoCE retransmit timer expires only after a look at what arrived: the
  // thread that checks the timers (the progress thread, while an application
  // polls) would otherwise take ACKs waiting in the socket for losses when
  // the application that reads them is descheduled (seen: 5-13 spurious
  // timeouts per GiB without loss, and RETRY_EXC_ERR, under load 10).
  if (roce_active_.load(std::memory_order_relaxed)) PollRoce();
  // Taken before the QPs are looked at: a due time posted after this stays
  // for the sleep (PlanSleep); one posted before it, the look below sees
  // (its poster held the QP's lock when it posted).
  timer_due_posted_.exchange(0, std::memory_order_seq_cst);
  // The shm wire's side of the same rule: an expiry is counted only after
  // our own ring was read. Its records wait there while the application that
  // drains them is descheduled (the thread watching it checks the timers but
  // leaves the ring to it), and an ACK among them answered the timer: on a
  // NIC it would have been taken as it came. Counted, a loaded host failed
  // healthy connections with RETRY_EXC_ERR (ib_write_lat two-copy beside
  // two busy loops: 2 of 20 runs). So a first pass defers such expiries, the
  // ring is drained, and a second pass counts what is still unanswered. If
  // another thread holds the ring (an application draining it now), the
  // expiries wait kRingLookRetryNs for it instead.
  bool ring_look_wanted = false;
  bool any = CheckQpTimers(now, next_deadline, &ring_look_wanted);
  if (!ring_look_wanted || ring_->ConsumerLocked()) return any;
  DrainRing(/*by_app=*/false);
  *next_deadline = 0;
  return CheckQpTimers(now, next_deadline, nullptr);
}

bool Engine::CheckQpTimers(uint64_t now, uint64_t* next_deadline, bool* ring_look_wanted) {
  std::shared_lock<std::shared_mutex> map_lock(qp_map_mutex_);
  bool any = false;
  for (Qp* qp : live_qps_) {
    std::lock_guard<SpinLock> lock(qp->lock);
    uint64_t deadline = 0;
    any |= transport::CheckTimers(*this, *qp, now, &deadline, ring_look_wanted);
    if (deadline && (!*next_deadline || deadline < *next_deadline)) *next_deadline = deadline;
  }
  return any;
}

void Engine::ActivateRoce() {
  if (roce_active_.exchange(true, std::memory_order_seq_cst)) return;
  // The port starts silent: a look at each of the first kRoceIdlePolls polls
  // was ~1,000 looks (~2 ms of system calls) at the start of every run of a
  // busy poller whose UD QPs only listen (ibv_ud_pingpong: 0.04 us a round
  // trip over 50,000). A RoCE peer's first datagram waits as after a silence.
  roce_silence_since_ns_.store(NowNs(), std::memory_order_relaxed);
  roce_empty_polls_.store(kRoceIdlePolls, std::memory_order_relaxed);
  ring_->Wake(shm::Ring::kWakeThread);  // once per process: it then looks every tick
}

void Engine::WatchTimers() {
  // The common case is one relaxed load: the flag is already set while the
  // progress thread watches timers. The seq_cst pair (flag here, state in
  // the thread) makes sure one of us sees the other.
  if (timers_armed_.load(std::memory_order_relaxed)) return;
  timers_armed_.store(true, std::memory_order_seq_cst);
  if (thread_state_.load(std::memory_order_seq_cst) == kSleepingForever)
    ring_->Wake(shm::Ring::kWakeThread);
}

// Called on the data path (a RoCE QP's first transmission after a pause, or
// its progress), so in the common case two loads: a due time as early or
// earlier is posted already, or the thread wakes about then anyway.
void Engine::TimerDueBy(uint64_t due_ns) {
  uint64_t posted = timer_due_posted_.load(std::memory_order_relaxed);
  while (posted == 0 || posted > due_ns) {
    if (timer_due_posted_.compare_exchange_weak(posted, due_ns, std::memory_order_seq_cst,
                                                std::memory_order_relaxed)) {
      // seq_cst, paired with PlanSleep's store and load.
      const uint64_t wakes_at = thread_wakes_at_.load(std::memory_order_seq_cst);
      if (wakes_at > due_ns + kTimerDueSlackNs) ring_->Wake(shm::Ring::kWakeThread);
      return;
    }
  }
}

uint64_t Engine::PlanSleep(uint64_t until) {
  thread_wakes_at_.store(until, std::memory_order_seq_cst);
  const uint64_t posted = timer_due_posted_.load(std::memory_order_seq_cst);
  return posted && posted < until ? posted : until;
}

bool Engine::TimersDue(uint64_t deadline, uint64_t now) const {
  const uint64_t posted = timer_due_posted_.load(std::memory_order_relaxed);
  return (deadline && now >= deadline) || (posted && now >= posted);
}

void Engine::ApplicationMayBlock() {
  polls_since_arm_ = 0;
  // seq_cst, paired with the watcher's store of kAppPolling and its load of
  // app_may_block_ after taking the ring's wake word: either it sees the
  // flag, or we see it watching and our Wake() moves the word it waits on.
  app_may_block_.store(true, std::memory_order_seq_cst);
  if (thread_state_.load(std::memory_order_seq_cst) == kAppPolling) {
    ring_->Wake(shm::Ring::kWakeThread);
  } else {
    WatchTimers();
  }
}

// Blocking waits. A thread blocked in ibv_get_cq_event used to wait in the
// channel pipe's read() while the progress thread slept on the ring: a
// message cost two wake-ups in a row (the producer's futex wake of the
// progress thread, which drained and wrote the event token, then the pipe's
// wake of the application). Now the application's thread waits on the ring
// itself and drains what arrives: its own drain writes the token it then
// reads, with no one else woken. Commits wake consumers only
// (Ring::kWakeConsumer), and while a thread waits this way the progress
// thread waits unannounced for kicks and its timers only (SleepUntilWork), so
// the commit wakes the thread that will consume. Tokens written by other
// threads (timers, flushes, another thread's drain) wake the waiter through
// TokenWritten. One waiter at a time (direct_waiter_); others block in
// read() as before, woken by the token the waiter's drain writes.
//
// After the event the application runs its own code and the progress thread
// still waits unannounced: records arriving before the application blocks
// or polls again wait for the thread's next timer (LeaveDirectWait kicks a
// thread that sleeps without one), at most kTimerTickNs while sends are
// outstanding.
namespace {
thread_local bool t_draining_for_event = false;  // this thread is the direct waiter
thread_local bool t_progress_thread = false;     // this thread is the progress thread
}  // namespace

bool Engine::DrainingInBackground() {
  return t_progress_thread || t_draining_for_event;
}

int Engine::WaitForChannelEvent(const void* channel, int nonblocking_fd, void* token, size_t len) {
  const void* none = nullptr;
  if (!direct_waiter_.compare_exchange_strong(none, channel, std::memory_order_seq_cst)) return 0;
  t_draining_for_event = true;
  int result = 0;
  shm::UncoveredSleeps uncovered;
  while (result == 0) {
    // Taken before the checks: a commit or token after them moves the word.
    const uint32_t word = ring_->PrepareToWait();
    const bool covered = ring_->AnnounceSleep();
    uint64_t pos = 0;
    const shm::Ring::HeadState head = ring_->Head(&pos);
    // (Work waiting for room in a peer's ring stays with the progress
    // thread's retries; what it completes writes tokens that wake us.)
    if (head == shm::Ring::HeadState::kReady) {
      ring_->FinishSleep();
      if (!DrainRing(/*by_app=*/false)) Backoff(64);  // the progress thread drains: let it
    } else {
      const ssize_t n = read(nonblocking_fd, token, len);
      if (n == static_cast<ssize_t>(len)) {
        ring_->FinishSleep();
        result = 1;
        break;
      }
      if (n >= 0 || errno != EAGAIN) {
        ring_->FinishSleep();
        if (n >= 0) errno = EIO;
        result = -1;
        break;
      }
      // A record being written: its commit wakes us, but only a drain can
      // tell that its writer died (Peek), so look again now and then. One
      // reserved before our announcement sends no wake-up: look again soon.
      if (head != shm::Ring::HeadState::kPending) ring_->PublishStalledClaim();
      const bool pending = ring_->Head() == shm::Ring::HeadState::kPending;
      int64_t timeout = pending ? static_cast<int64_t>(kAppPollingTickNs) : -1;
      if (!covered)
        timeout = uncovered.Next(pos, static_cast<int64_t>(kAppPollingTickNs));
      else
        uncovered.Reset();
      const shm::Ring::WakeReason why =
          ring_->Sleep(word, timeout, shm::Ring::kWakeConsumer | shm::Ring::kWakeEventWaiter);
      ring_->FinishSleep();
      if (pending || !covered) DrainRing(/*by_app=*/false);
      if (why == shm::Ring::WakeReason::kInterrupted) {
        errno = EINTR;
        result = -1;
        break;
      }
      continue;
    }
    const ssize_t n = read(nonblocking_fd, token, len);
    if (n == static_cast<ssize_t>(len))
      result = 1;
    else if (n >= 0 || errno != EAGAIN) {
      if (n >= 0) errno = EIO;
      result = -1;
    }
  }
  t_draining_for_event = false;
  LeaveDirectWait();
  return result;
}

void Engine::WakeDirectWaiter() {
  // The waiter's own drain wrote it: it reads the token next.
  if (!t_draining_for_event) ring_->Wake(shm::Ring::kWakeEventWaiter);
}

// Paired with SleepUntilWork's store of the thread's sleep state and load of
// direct_waiter_ (both seq_cst): either the thread sees that nobody waits
// here any more and sleeps announced, or we see it asleep and kick a sleep
// that has no timeout. A timed sleep ends by itself soon enough.
void Engine::LeaveDirectWait() {
  direct_waiter_.store(nullptr, std::memory_order_seq_cst);
  if (thread_state_.load(std::memory_order_seq_cst) == kSleepingForever)
    ring_->Wake(shm::Ring::kWakeThread);
}

// The progress thread's states (thread_state_), and who acts on them:
//
//  kRunning          draining the ring, serving QPs, checking timers.
//                    Application drains may defer ACKs (DeferAcks): the
//                    thread looks again soon.
//  kSleepingTimed,   asleep on the ring's wake word, announced (in the
//  kSleepingForever  reserve word), so the next record wakes it: until
//                    the next timer, or indefinitely (an idle process uses no
//                    CPU). WatchTimers wakes a forever-sleeper when sends
//                    become outstanding. Application drains flush their ACKs
//                    at once (FlushAcksBeforeSleep orders the two sides).
//  kAppPolling       watching an application that polls its CQs, and so
//                    drains the ring itself (WatchPollingApplication). The
//                    thread looks in at least once per window, so application
//                    drains may defer ACKs; ApplicationMayBlock kicks it
//                    (Ring::Wake) to take the ring over before the application
//                    blocks in a completion channel.
//
// Watching is quiet or on the ring (AppWatch::on_ring):
//  quiet    the thread waits unannounced: producers make no system call, and
//           it takes no lock while the application drains (a thread
//           preempted holding the consumer lock would stall every poll). Once
//           per window it looks at the ring's head. A record there gets a
//           grace (kAppDrainGraceNs) in which a polling application drains
//           it; a record still at the same position after that was left for
//           the thread: the application polls now and then but waits for
//           something else, e.g. memory that a two-copy RDMA WRITE in that
//           very record is to write. The watch ends (kRecordLeft), the thread
//           drains it, and watches on the ring from then on. (A record still
//           being written gets a whole window: only a drain can tell that its
//           writer died.)
//  on ring  the thread announces itself before each wait, so that the next
//           commit wakes it. A record found at the head position it slept on
//           was left for it (the wake-up took microseconds, a polling
//           application drains within a poll): it drains it at once. One
//           already there when it comes to wait gets the grace, as when
//           quiet. A head position that moved means the application drained
//           by itself; after kAppDrainsBeforeQuiet such looks since the
//           thread last had to drain, the watch goes quiet again, so that an
//           application draining its own ring costs its producers no
//           system calls.
//
// Every window the watcher checks the retransmit timers (every kTimerTickNs)
// and whether the application still polls (app_polls_ moved). When it
// stopped, or may block (app_may_block_), the watch ends and the thread takes
// the ring over (kRunning, then kSleeping*). Otherwise the thread sends the
// ACKs held back (DeferAcks), so that they wait one window at most after the
// application stopped polling, and doubles the next window (up to
// kAppPollingMaxTickNs): a busy-polling application is interrupted a few
// hundred times a second, not thousands. A watch that ended on a record left
// for the thread resumes after the drain in the same window, shortened to
// kAppPollingTickNs again.
void Engine::StartWatchWindow(AppWatch* watch, uint64_t polls, uint64_t now) {
  watch->seen_polls = polls;
  watch->window_start = now;
  watch->window = kAppPollingTickNs;
}

Engine::WatchEnd Engine::WatchPollingApplication(AppWatch* watch) {
  // seq_cst: see ApplicationMayBlock.
  thread_state_.store(kAppPolling, std::memory_order_seq_cst);
  WatchEnd end = WatchEnd::kStopping;
  HeadLook look;
  ring_->Head(&look.seen_pos);
  look.window_seen = watch->window_start;
  for (;;) {
    // Taken before the checks: a Wake() after them ends the wait below.
    const uint32_t word = ring_->PrepareToWait();
    if (stop_.load(std::memory_order_seq_cst)) break;
    if (app_may_block_.load(std::memory_order_seq_cst)) {
      end = WatchEnd::kAppMayBlock;
      break;
    }
    const uint64_t now = NowNs();
    if (TimersDue(watch->timer_deadline, now)) CheckTimersForWatch(watch, now);
    if (now - watch->window_start >= watch->window && !NextWatchWindow(watch, now)) {
      end = WatchEnd::kAppStopped;
      break;
    }
    bool ready = false;
    uint64_t deadline = watch->window_start + watch->window;
    if (RecordLeftAtHead(watch, &look, now, &ready, &deadline)) {
      end = WatchEnd::kRecordLeft;
      break;
    }
    if (watch->timer_deadline > now) deadline = std::min(deadline, watch->timer_deadline);
    if (WatchRocePort(watch, now, &deadline)) continue;
    // A RoCE timer posted since the check above (TimerDueBy) shortens it.
    deadline = PlanSleep(deadline);
    if (deadline <= now) {  // ... or is due already: check it first
      thread_wakes_at_.store(0, std::memory_order_relaxed);
      continue;
    }
    WatchSleep(watch, &look, word, static_cast<int64_t>(deadline - now), ready);
    thread_wakes_at_.store(0, std::memory_order_relaxed);
  }
  thread_state_.store(kRunning, std::memory_order_relaxed);
  if (end == WatchEnd::kRecordLeft) {
    watch->window = kAppPollingTickNs;  // the application may not look again soon
    if (!watch->on_ring) watch->on_ring = !OnOneCpu();
    watch->app_drains = 0;
  }
  return end;
}

// The watch's look at the ring's head (see "Watching is quiet or on the
// ring" above). true: a record there was left for the thread. Else *ready
// says whether a committed record is at the head, and *deadline is lowered
// to the end of the grace given to the record being timed, if any.
bool Engine::RecordLeftAtHead(AppWatch* watch, HeadLook* look, uint64_t now, bool* ready,
                              uint64_t* deadline) {
  uint64_t pos = 0;
  const shm::Ring::HeadState head = ring_->Head(&pos);
  if (pos != look->seen_pos) {  // only the application drains while we watch
    look->seen_pos = pos;
    if (watch->on_ring && ++watch->app_drains >= kAppDrainsBeforeQuiet) watch->on_ring = false;
  }
  *ready = head == shm::Ring::HeadState::kReady;
  if (*ready && look->slept_on_ring && pos == look->slept_pos)
    return true;  // its commit woke us, and it is still there
  look->slept_on_ring = false;
  if (watch->window_start != look->window_seen) {
    look->window_seen = watch->window_start;
    look->app_drained_timed = false;
  }
  if (head == shm::Ring::HeadState::kEmpty) {
    look->timing = false;
  } else if (look->timing && pos == look->timed_pos) {
    if (*ready != look->timed_ready) {  // its commit came: the grace starts now
      look->timed_ready = *ready;
      look->timed_since = now;
    }
  } else if (look->timing && !watch->on_ring) {
    // The application drained the record we timed: it drains by itself.
    // Quiet, we look again next window; timing every record that happens
    // to be at the head when we look (a ping-pong has one there about
    // half the time) would wake us every grace, preempting the
    // application on a host whose cores it keeps busy.
    look->timing = false;
    look->app_drained_timed = true;
  } else if (!look->app_drained_timed || watch->on_ring) {
    look->timing = true;
    look->timed_ready = *ready;
    look->timed_pos = pos;
    look->timed_since = now;
  }
  const uint64_t grace = *ready ? kAppDrainGraceNs : kAppPollingTickNs;
  if (look->timing && now - look->timed_since >= grace) return true;
  if (look->timing) *deadline = std::min(*deadline, look->timed_since + grace);
  return false;
}

// The watch's wait until its deadline (`timeout` ns): announced on the ring
// when on_ring (the next commit wakes it), else for kicks only.
void Engine::WatchSleep(AppWatch* watch, HeadLook* look, uint32_t word, int64_t timeout,
                        bool ready) {
  // Datagrams left for us before: the port's watcher wakes us when one
  // comes (not while some are given their grace: it would wake at once).
  const bool arm_port = watch->on_port && !watch->port_timing;
  if (arm_port) ArmRoceWatcher();
  if (watch->on_ring && !ready) {
    // An announcement that does not cover a record being written when it
    // was made leaves that record to the window's timing, as when quiet.
    ring_->AnnounceSleep();
    // A commit before the announcement sent no wake-up: look once more.
    if (ring_->Head(&look->slept_pos) != shm::Ring::HeadState::kReady) {
      ring_->Sleep(word, timeout);
      look->slept_on_ring = true;
    }
    ring_->FinishSleep();
  } else {
    ring_->Sleep(word, timeout, shm::Ring::kWakeThread);  // quiet: no commit ends it
  }
  if (arm_port) roce_watch_armed_.store(0, std::memory_order_relaxed);
}

// The RoCE port during a watch. The ring's rule (kRecordLeft) for datagrams:
// a polling application takes them in its polls (PollRoce), but one that
// spins on memory (ib_write_lat waits for the peer's WRITE and polls its CQ
// once per iteration) never does, and on a NIC the WRITE lands by DMA with
// no help from it. So: at each window's end (and, once on_port, whenever
// the port's watcher wakes us) look whether datagrams wait; give them
// kRoceAppGraceNs; if the application took none meanwhile, take them, and
// from then on arm the watcher during the watch's sleeps (a wake-up and the
// grace per datagram the application leaves, instead of waiting up to a
// window: 6-8 ms per ib_write_lat iteration before). kAppDrainsBeforeQuiet
// takes by the application within the grace, or kRoceEmptyWakesBeforeQuiet
// wake-ups that found the port emptied, since our last take and the watch
// leaves the port alone again, so a busy poller pays few wake-ups.
// true: datagrams taken (look again before sleeping). Else *deadline is
// lowered to the grace's end if one runs.
bool Engine::WatchRocePort(AppWatch* watch, uint64_t now, uint64_t* deadline) {
  const int fd = roce_watch_fd_.load(std::memory_order_relaxed);
  if (!roce_active_.load(std::memory_order_relaxed) || fd < 0) {
    watch->port_timing = false;
    return false;
  }
  const bool window_ended = watch->window_start != watch->port_window_seen;
  watch->port_window_seen = watch->window_start;
  if (!watch->on_port && !watch->port_timing && !window_ended) return false;
  const uint64_t takes = roce_app_takes_.load(std::memory_order_relaxed);
  const bool woken = roce_watcher_woke_.exchange(false, std::memory_order_relaxed);
  pollfd readable{fd, POLLIN, 0};
  const bool waiting = poll(&readable, 1, 0) > 0;
  // The application took datagrams within their grace: it polls the port.
  if (watch->port_timing && takes != watch->port_takes_seen) {
    watch->port_timing = false;
    if (watch->on_port && ++watch->port_app_takes >= kAppDrainsBeforeQuiet) watch->on_port = false;
  }
  // Woken for datagrams that the application took before we looked: it
  // polls too, but such a wake-up is also what an application polling for
  // its own ACK (ib_write_lat) causes once per iteration, so only a long run
  // of them since our last take ends the port watch.
  if (woken && !waiting && watch->on_port &&
      ++watch->port_empty_wakes >= kRoceEmptyWakesBeforeQuiet)
    watch->on_port = false;
  if (!waiting) {
    watch->port_timing = false;
    return false;
  }
  if (!watch->port_timing) {
    watch->port_timing = true;
    watch->port_since = now;
    watch->port_takes_seen = takes;
  }
  if (now - watch->port_since < kRoceAppGraceNs) {
    *deadline = std::min(*deadline, watch->port_since + kRoceAppGraceNs);
    return false;
  }
  watch->port_timing = false;
  watch->on_port = true;
  watch->port_app_takes = 0;
  watch->port_empty_wakes = 0;
  for (int batch = 0; batch < kRoceWatchBatches && PollRoce(); ++batch) {
  }
  return true;
}

// Before a sleep: a datagram on the port wakes the thread (RoceWatchMain).
// Called after the sleep's PrepareToWait, so that the watcher's Wake() ends
// it; the caller clears roce_watch_armed_ after the sleep.
void Engine::ArmRoceWatcher() {
  roce_watcher_woke_.store(false, std::memory_order_relaxed);
  roce_watch_armed_.store(1, std::memory_order_seq_cst);
  FutexWakePrivate(&roce_watch_armed_);
}

// With one CPU the thread runs only while the application does not, so a
// record it finds waiting may have been left only because the application
// was not running; waking on every commit then adds a context switch per
// record and no speed (ib_send_lat with both processes on one CPU: 1.1 ms
// typical, 2.7 ms on the ring). Asked when the watch would go on the ring
// (the affinity may change after the start).
bool Engine::OnOneCpu() {
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) == 1;
}

// The transport's timers, checked from the watch (whose sleeps end at the
// next deadline that check returns).
void Engine::CheckTimersForWatch(AppWatch* watch, uint64_t now) {
  uint64_t deadline = 0;
  CheckTimers(now, &deadline);
  watch->last_timer_check = now;
  watch->timer_deadline = deadline;
}

// A window of the watch ended: check the timers if due, and whether the
// application polled in it. false: it did not (the watch ends).
bool Engine::NextWatchWindow(AppWatch* watch, uint64_t now) {
  if (now - watch->last_timer_check >= kTimerTickNs) {
    CheckTimersForWatch(watch, now);
    // As before a sleep (SleepUntilWork), but only once per tick: it reads the
    // producers' line, and the application's drains never look for it.
    ring_->PublishStalledClaim();
  }
  const uint64_t polls = app_polls_.load(std::memory_order_relaxed);
  if (polls == watch->seen_polls) return false;
  // ACKs held back for a reply (DeferAcks) may wait for an application that
  // polled during this window but stopped since: send them now (one ACK
  // record a window at most where a reply would have carried it), so that
  // they wait one window at most. Not if the application drains meanwhile:
  // it sends or defers them itself.
  FlushDeferredAcks();
  const uint64_t window = std::min(watch->window * 2, kAppPollingMaxTickNs);
  StartWatchWindow(watch, polls, now);
  watch->window = window;
  return true;
}

void Engine::ThreadMain() {
  t_progress_thread = true;
  // Named for `top -H`, `perf sched` and the tests.
  prctl(PR_SET_NAME, "softrdma-prog", 0, 0, 0);
  ProgressLoop loop;
  loop.watch.seen_polls = app_polls_.load(std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t now = NowNs();
    const bool roce = roce_active_.load(std::memory_order_relaxed);
    uint64_t next_deadline = 0;
    bool timers_live = false;
    if (DoProgressWork(&loop, now, roce, &next_deadline, &timers_live)) continue;
    const uint64_t polls = app_polls_.load(std::memory_order_relaxed);
    if ((loop.watch_again || polls != loop.watch.seen_polls) &&
        !app_may_block_.load(std::memory_order_seq_cst)) {
      if (!loop.watch_again) StartWatchWindow(&loop.watch, polls, now);
      loop.watch_again = WatchPollingApplication(&loop.watch) == WatchEnd::kRecordLeft;
      continue;
    }
    loop.watch_again = false;
    if (roce && LingerOnRocePort(&loop, now)) continue;
    SleepUntilWork(&loop, roce, ThreadSleepTimeout(now, next_deadline, timers_live, roce));
  }
}

// One round of the progress thread's work: the ring, the RoCE port, deferred
// ACKs, QPs waiting for service, and the timers when due. true: something
// was done (look again before sleeping). *next_deadline: the earliest timer
// deadline known (0: none); *timers_live: timers run (tick while sleeping).
bool Engine::DoProgressWork(ProgressLoop* loop, uint64_t now, bool roce, uint64_t* next_deadline,
                            bool* timers_live) {
  AppWatch& watch = loop->watch;
  bool did = DrainRing(/*by_app=*/false);
  if (roce && PollRoce()) {
    did = true;
    loop->roce_linger_until = now + kRoceLingerNs;
  }
  // ACKs an application's drain held back: at the latest about one window
  // after the application stopped polling (see DeferAcks).
  FlushDeferredAcks();
  if (service_pending_.load(std::memory_order_acquire)) did |= ServiceQps(now, next_deadline);
  if (now - watch.last_timer_check >= kTimerTickNs || did || TimersDue(watch.timer_deadline, now)) {
    uint64_t timer_deadline = 0;
    *timers_live = CheckTimers(now, &timer_deadline);
    watch.last_timer_check = now;
    watch.timer_deadline = timer_deadline;
  } else {
    *timers_live = true;  // checked recently; keep ticking
  }
  if (watch.timer_deadline && (!*next_deadline || watch.timer_deadline < *next_deadline))
    *next_deadline = watch.timer_deadline;
  return did;
}

// Datagrams came a moment ago: the next burst is likely close behind, so
// wait on the port itself for up to kRoceLingerNs. false: no linger due.
bool Engine::LingerOnRocePort(ProgressLoop* loop, uint64_t now) {
  if (now >= loop->roce_linger_until || roce_watch_fd_ < 0) return false;
  const timespec linger{0, static_cast<long>(loop->roce_linger_until - now)};
  pollfd fd{roce_watch_fd_.load(), POLLIN, 0};
  ppoll(&fd, 1, &linger, nullptr);
  loop->roce_linger_until = 0;  // renewed by the next poll that finds datagrams
  return true;
}

// How long the idle thread may sleep (0: until kicked or a record comes).
uint64_t Engine::ThreadSleepTimeout(uint64_t now, uint64_t next_deadline, bool timers_live,
                                    bool roce) {
  uint64_t timeout = 0;
  if (timers_live) timeout = kTimerTickNs;
  if (next_deadline) {
    uint64_t until = next_deadline > now ? next_deadline - now : 1;
    if (!timeout || until < timeout) timeout = until;
  }
  // Work that waits for room in a peer's ring: look again soon, without
  // spinning (the peer may be slow, or gone until its timer fires).
  if (service_pending_.load(std::memory_order_acquire) && (!timeout || timeout > kBlockedRetryNs))
    timeout = kBlockedRetryNs;
  // The RoCE port's packets do not wake this futex: look every tick while
  // a QP uses the wire (docs/design.md "RoCEv2 transport": progress).
  const bool roce_watched = roce && roce_watch_fd_ >= 0;
  if (roce && !roce_watched && (!timeout || timeout > kRocePollNs)) timeout = kRocePollNs;
  return timeout;
}

// The idle thread's sleep (kSleepingTimed or kSleepingForever, see "The
// progress thread's states"): announced on the ring unless an application
// thread consumes in our place; returns early, without sleeping, when a
// look after the announcement finds work. `roce`: the RoCE wire was active
// at the top of this round.
void Engine::SleepUntilWork(ProgressLoop* loop, bool roce, uint64_t timeout) {
  thread_state_.store(timeout ? kSleepingTimed : kSleepingForever, std::memory_order_seq_cst);
  // An application drain may have held ACKs back before it could see
  // that we sleep (DeferAcks): they must not wait for our wake-up.
  FlushAcksBeforeSleep();
  // The wake word is taken after the state store (paired with
  // LeaveDirectWait, see there) and before the look at timers_armed_
  // (paired with WatchTimers): a post that arms the timers after that look
  // sees us asleep without a timeout and kicks, and the kick moves the word
  // we are about to sleep on. Taken after the look, it could already hold
  // that kick, and we would sleep with no timeout while sends are
  // outstanding, until something else came into the ring.
  uint32_t word = ring_->PrepareToWait();
  if (!timeout && timers_armed_.exchange(false, std::memory_order_seq_cst)) {
    // Sends were posted since we last looked: watch their timers.
    thread_state_.store(kRunning, std::memory_order_relaxed);
    loop->watch.last_timer_check = 0;
    return;
  }
  // An application thread blocked for a completion event consumes in our
  // place (WaitForChannelEvent): commits must wake it, not us, so we wait
  // unannounced, for kicks and our timeout only.
  const bool app_consumes = direct_waiter_.load(std::memory_order_seq_cst) != nullptr;
  const bool covered = app_consumes || ring_->AnnounceSleep();
  // A QP took the RoCE wire since the top of this round: its kick
  // (ActivateRoce's Wake) may have come before PrepareToWait, so look
  // again rather than sleep without polling the port or arming the watcher.
  if (!roce && roce_active_.load(std::memory_order_seq_cst)) {
    if (!app_consumes) ring_->FinishSleep();
    thread_state_.store(kRunning, std::memory_order_relaxed);
    return;
  }
  // A producer between reserve and commit with nobody reserving after it
  // is invisible at the head until its claim is in the seq word: put it
  // there, so that the record reads as pending and Peek can tell if that
  // producer died (ring.h).
  ring_->PublishStalledClaim();
  uint64_t head_pos = 0;
  shm::Ring::HeadState head = ring_->Head(&head_pos);
  if (head == shm::Ring::HeadState::kPending && (!timeout || timeout > kPendingRecheckNs))
    timeout = kPendingRecheckNs;  // so that Peek can notice a writer that died
  // A record reserved before our announcement commits without waking us.
  if (!covered) {
    const auto sleep = static_cast<uint64_t>(
        loop->uncovered.Next(head_pos, static_cast<int64_t>(kPendingRecheckNs)));
    if (!timeout || timeout > sleep) timeout = sleep;
  } else {
    loop->uncovered.Reset();
  }
  if ((app_consumes || head != shm::Ring::HeadState::kReady) && !stop_.load()) {
    const bool roce_watched = roce && roce_watch_fd_ >= 0;
    if (roce_watched) {
      // After PrepareToWait: a datagram already waiting makes the
      // watcher's poll() return at once, and its Wake() this Sleep.
      roce_watch_armed_.store(1, std::memory_order_seq_cst);
      FutexWakePrivate(&roce_watch_armed_);
    }
    // A RoCE timer posted since the check (TimerDueBy) shortens it.
    const uint64_t start = NowNs();
    const uint64_t until = PlanSleep(timeout ? start + timeout : UINT64_MAX);
    if (until != UINT64_MAX) timeout = until > start ? until - start : 1;
    ring_->Sleep(
        word, timeout ? static_cast<int64_t>(timeout) : -1,
        app_consumes ? shm::Ring::kWakeThread : shm::Ring::kWakeThread | shm::Ring::kWakeConsumer);
    thread_wakes_at_.store(0, std::memory_order_relaxed);
    if (roce_watched) roce_watch_armed_.store(0, std::memory_order_relaxed);
  }
  if (!app_consumes) ring_->FinishSleep();
  thread_state_.store(kRunning, std::memory_order_relaxed);
}

roce::PacketPort* Engine::OpenPacketPort() {
  std::lock_guard<std::mutex> lock(roce_port_mutex_);
  if (!roce_port_tried_) {
    roce_port_tried_ = true;
    Status err;
    roce_port_ = transport::roce::OpenPacketPort(&err);
    if (!roce_port_)
      SOFTRDMA_LOG(kWarn, "no RoCE packet port: %s (peers on other hosts are unreachable)",
                   err.message().c_str());
    else
      StartRoceWatch();
    roce_port_view_.store(roce_port_.get(), std::memory_order_release);
    roce_port_ready_.store(true, std::memory_order_release);
  }
  return roce_port_.get();
}

void Engine::SetPacketPortForTesting(std::unique_ptr<roce::PacketPort> port) {
  std::lock_guard<std::mutex> lock(roce_port_mutex_);
  // Not while a poll uses the old one (the progress thread's).
  std::lock_guard<SpinLock> rx(roce_rx_lock_);
  StopRoceWatch();  // it polls the old port's fd
  roce_port_ = std::move(port);
  roce_port_view_.store(roce_port_.get(), std::memory_order_release);
  StartRoceWatch();
  roce_port_tried_ = true;
  roce_forced_for_testing_ = roce_port_ != nullptr;
  roce_port_ready_.store(true, std::memory_order_release);
}

void Engine::StartRoceWatch() {
  const int fd = roce_port_ ? roce_port_->ReadableFd() : -1;
  if (fd < 0 || roce_watch_thread_.joinable()) return;
  roce_watch_stop_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (roce_watch_stop_ < 0) return;  // the progress thread polls every ms instead
  roce_watch_quit_.store(false);
  roce_watch_fd_ = fd;
  roce_watch_thread_ = std::thread([this] { RoceWatchMain(); });
}

void Engine::StopRoceWatch() {
  if (!roce_watch_thread_.joinable()) return;
  roce_watch_quit_.store(true);
  const uint64_t one = 1;
  if (write(roce_watch_stop_, &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow: it is readable then anyway.
  }
  roce_watch_armed_.store(1);
  FutexWakePrivate(&roce_watch_armed_);
  roce_watch_thread_.join();
  close(roce_watch_stop_);
  roce_watch_stop_ = -1;
  roce_watch_fd_ = -1;
  roce_watch_armed_.store(0);
}

// Blocked in poll() on the port's fd; after a datagram, blocked on the
// futex until the progress thread sleeps again. Runnable once per datagram
// burst that finds the thread asleep or the watcher in poll(): never for
// each packet of a polling application.
void Engine::RoceWatchMain() {
  prctl(PR_SET_NAME, "softrdma-rocew", 0, 0, 0);
  while (!roce_watch_quit_.load(std::memory_order_relaxed)) {
    pollfd fds[2] = {{roce_watch_fd_.load(), POLLIN, 0}, {roce_watch_stop_, POLLIN, 0}};
    if (poll(fds, 2, -1) <= 0) continue;
    if (fds[1].revents & POLLIN) break;
    // A datagram waits: the progress thread takes it if it sleeps (else it
    // is awake, or the application polls, and finds it). Then wait until
    // the thread sleeps again, having drained the port meanwhile: the fd
    // stays readable until then, and polling it would spin.
    if (roce_watch_armed_.exchange(0, std::memory_order_seq_cst)) {
      roce_watcher_woke_.store(true, std::memory_order_relaxed);
      ring_->Wake(shm::Ring::kWakeThread);
    }
    while (roce_watch_armed_.load(std::memory_order_seq_cst) == 0 &&
           !roce_watch_quit_.load(std::memory_order_relaxed))
      FutexWaitPrivate(&roce_watch_armed_, 0, 0);
  }
}

bool Engine::roce_forced() const {
  return roce_forced_for_testing_ || transport::roce::WireForcedToRoce();
}

bool Engine::PollRoce(bool by_app) {
  // Racy by design: a heuristic shared by the pollers.
  const uint32_t empty = roce_empty_polls_.load(std::memory_order_relaxed);
  if (by_app && empty >= kRoceIdlePolls) {
    roce_idle_skip_.store(kRoceIdlePollStride - 1, std::memory_order_relaxed);
    const uint64_t now = NowNs();
    const uint64_t silence = now - roce_silence_since_ns_.load(std::memory_order_relaxed);
    const uint64_t interval =
        std::clamp(silence >> kRoceIdleLookShift, kRoceIdleLookNs, kRoceIdleLookMaxNs);
    if (now - roce_idle_look_ns_.load(std::memory_order_relaxed) < interval) return false;
    roce_idle_look_ns_.store(now, std::memory_order_relaxed);
  }
  if (!packet_port() || !roce_rx_lock_.try_lock()) return false;
  roce::PacketPort* port = roce_port_.get();  // under the lock: a test may swap it
  if (!port) {
    roce_rx_lock_.unlock();
    return false;
  }
  const int n = PollRoceBatch(port);
  roce_rx_lock_.unlock();
  // Only a poll that took datagrams counts as a take (WatchRocePort: "the
  // application takes the datagrams itself again"): an empty look says
  // nothing of what it does with datagrams that wait, and the polls of an
  // application that spins on memory and looks at its CQ now and then
  // (ib_write_lat) mostly find nothing. A look that found the waiting
  // datagrams all for other processes (ForwardingPort counts only ours)
  // empties the port all the same, which ends their grace.
  if (by_app && n > 0)
    roce_app_takes_.store(roce_app_takes_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
  if (n > 0) {
    roce_empty_polls_.store(0, std::memory_order_relaxed);
    roce_idle_skip_.store(0, std::memory_order_relaxed);  // busy again: every call looks
  } else if (empty < kRoceIdlePolls) {
    roce_empty_polls_.store(empty + 1, std::memory_order_relaxed);
    // The silence that spaces the thinned looks out starts here.
    if (empty + 1 == kRoceIdlePolls)
      roce_silence_since_ns_.store(NowNs(), std::memory_order_relaxed);
  }
  return n > 0;
}

int Engine::PollRoceBatch(roce::PacketPort* port, bool execute) {
  // One writer (roce_rx_lock_); peers read it with an atomic load.
  __atomic_store_n(roce_polls_word_, *roce_polls_word_ + 1, __ATOMIC_RELAXED);
  std::vector<Qp*> acks;
  const int n = port->Poll(
      [&](const roce::InDatagram& d) {
        if (execute) transport::roce::OnDatagram(*this, d, &acks);
      },
      kRocePollBatch);
  // One ACK per QP per burst (rc-transport.md §4.5: coalesced).
  for (Qp* qp : acks) {
    std::lock_guard<SpinLock> lock(qp->lock);
    transport::roce::SendOwedAck(*this, *qp);
  }
  return n;
}

void Engine::ReadRocePortEmpty(bool execute) {
  if (!roce_port_ready_.load(std::memory_order_acquire)) return;
  for (int batch = 0; batch < kRoceSettleBatches; ++batch) {
    std::lock_guard<SpinLock> rx(roce_rx_lock_);
    roce::PacketPort* port = roce_port_.get();
    if (!port) return;
    if (PollRoceBatch(port, execute) > 0) continue;
    // Nothing for us in this batch, but the port may have forwarded a batch
    // for other processes (ForwardingPort counts only what it delivers
    // here), our own ACKs among them on a one-address host: go on while
    // anything is still readable.
    const int fd = port->ReadableFd();
    pollfd readable{fd, POLLIN, 0};
    if (fd < 0 || poll(&readable, 1, 0) <= 0) return;
  }
}

}  // namespace softrdma
