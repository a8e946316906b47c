// The per-process transport engine: this process's attachment to the host
// registry, its shared segment (inbound ring + published MR table), the
// links to peer processes, the QPN -> QP map, and the progress thread.
//
// Progress (see docs/design.md): verbs calls drive it inline — ibv_poll_cq
// drains the inbound ring, so a busy-polling application sees a message as
// soon as it lands. A background thread covers the times the application is
// not polling: it sleeps on the ring's futex and is woken by producers only
// when it has announced that it sleeps; while the application polls, it
// stays out of the way (no wake-ups, no system calls for the producers).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/uio.h>

#include "core/memory_export.h"
#include "core/mr_table.h"
#include "core/qp.h"
#include "host/registry.h"
#include "transport/messages.h"
#include "transport/peer_death_watch.h"
#include "transport/peer_mappings.h"
#include "util/spinlock.h"
#include "util/status.h"
#include "wire/roce/packet_port.h"
#include "wire/shm/ring.h"
#include "wire/shm/shm_region.h"

namespace softrdma {

// A mapped peer process: its ring (to send it records) and its MR table.
struct PeerLink {
  ProcRef ref;
  pid_t pid = 0;
  shm::ShmRegion region;
  shm::Ring* ring = nullptr;
  const MrEntry* mrs = nullptr;
  // The peer's registered memory mapped here (nullptr for ourselves, or
  // when SOFTRDMA_MAP_MR=0): one-sided operations become memcpy.
  std::unique_ptr<transport::PeerMappings> mappings;
  // Set once the peer answered kPullRefused: it cannot read our memory with
  // cross-memory attach, so bulk data to it goes by fragments.
  std::atomic<bool> pull_refused{false};
  // Set once process_vm_readv/writev into the peer was refused: one-sided
  // operations to it go through its ring (two copies).
  std::atomic<bool> direct_refused{false};
  // Set when a destroyed QP's owed ACK could not get into the peer's ring
  // in Engine::SendOwed's time: later destroys give it one try only, so that
  // a stopped peer costs one wait, not one per QP.
  std::atomic<bool> owed_acks_stalled{false};
  // The peer's count of looks at its RoCE port, in its segment (0: it has
  // none, or a build that does not count): a RoCE requester whose peer is a
  // process of this host sees from it whether that process runs at all
  // (transport/roce, "ResponderNotScheduled").
  const uint64_t* roce_polls = nullptr;
  // Set when the peer process has exited (transport/peer_death_watch.h):
  // nothing is placed into its memory any more, and requests to it go
  // unanswered, as to a node that died.
  std::atomic<bool> gone{false};
};

class Engine {
 public:
  // The process's engine, created on first use. nullptr (and *err) when the
  // host registry or the shared segment cannot be set up. Inline: every
  // ibv_poll_cq asks, so the common case is one load.
  static Engine* Get(Status* err) {
    Engine* e = current_.load(std::memory_order_acquire);
    return e ? e : Create(err);
  }
  // The engine if it exists already (nullptr otherwise).
  static Engine* Current() { return current_.load(std::memory_order_acquire); }

  ProcRef me() const { return me_; }
  Registry& registry() { return registry_; }
  MrTable& mr_table() { return *mr_table_; }
  MemoryExporter& exporter() { return *exporter_; }
  // This process's inbound ring (tests count the records it received).
  const shm::Ring& inbound_ring() const { return *ring_; }
  uint32_t NewPdId() { return next_pd_id_.fetch_add(1, std::memory_order_relaxed); }

  Status RegisterQp(Qp* qp, uint32_t* qpn);
  void UnregisterQp(Qp* qp);

  // The QP of this process with number `qpn`, or nullptr. Only stable for
  // the ring consumer and for holders of that QP's lock.
  Qp* LocalQp(uint32_t qpn) const {
    const uint32_t index = registry_.IndexOf(qpn);  // kQpnTableSize: another registry's
    return index < kQpnTableSize ? qp_by_qpn_[index].load(std::memory_order_acquire) : nullptr;
  }

  // Maps the process that owns `qpn`; nullptr if no live process owns it.
  std::shared_ptr<PeerLink> ResolveQpn(uint32_t qpn);
  std::shared_ptr<PeerLink> Peer(ProcRef ref);

  // Inline progress from verbs calls: drain the inbound ring and retry work
  // that waited for ring space or a timer. A busy-polling application calls
  // this in a loop and mostly finds nothing, so that case is a handful of
  // loads: no lock, no atomic read-modify-write, no call.
  void Progress() {
    CountPoll();
    if (app_may_block_.load(std::memory_order_relaxed)) CountPollAfterArm();
    if (ring_->HeadReady() || service_pending_.load(std::memory_order_relaxed) || RoceLookDue())
      ProgressSlow();
  }
  // Progress() would do nothing but count the poll: nothing at the ring's
  // head, no deferred work or ACKs held back, no armed CQ to account for,
  // no look at the RoCE port due. Loads only, but for the countdown of an
  // idle port's looks (RoceLookDue).
  bool NothingToDrive() {
    return !app_may_block_.load(std::memory_order_relaxed) &&
           !service_pending_.load(std::memory_order_relaxed) &&
           !acks_deferred_.load(std::memory_order_relaxed) && !ring_->HeadReady() && !RoceLookDue();
  }
  // Whether this verbs call should look at the RoCE port (PollRoce). Once
  // the port has been idle for a while, PollRoce lets only every
  // kRoceIdlePollStride-th call come to it; the calls in between pass here
  // on a countdown, inline, so that a busy poller whose UD QP merely listens
  // on the wire keeps the empty poll's few loads (ibv_poll_cq's leaf path)
  // instead of two calls, the counting and a clock read every few polls.
  // Racy by design, as the counts it thins: concurrent pollers may skip a
  // little more or less.
  bool RoceLookDue() {
    if (!roce_active_.load(std::memory_order_relaxed)) return false;
    const uint32_t skip = roce_idle_skip_.load(std::memory_order_relaxed);
    if (skip == 0) return true;
    roce_idle_skip_.store(skip - 1, std::memory_order_relaxed);
    return false;
  }
  // Called when a poll found nothing to return: the application waits
  // rather than answers, so ACKs held back for its reply go now.
  void PollFoundNothing() {
    if (acks_deferred_.load(std::memory_order_relaxed)) FlushDeferredAcks();
  }
  // The progress thread watches this change to know that the application
  // polls. A plain increment: nobody needs it exact.
  void CountPoll() {
    app_polls_.store(app_polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // Before the application moves a QP to ERR (not holding any QP's lock):
  // executes what already reached the ring and sends every ACK owed, none
  // deferred. An HCA acknowledges a message as it arrives, long before
  // software stops the QP, and an ACK that arrived must complete its send
  // before the flush does (rdma_disconnect moves the QP to ERR just before
  // its DREQ, which would otherwise overtake the ACK).
  void SettleBeforeError();
  // The RoCE wire's side of that, also before a QP is destroyed or reset and
  // at exit: receives what the port holds now (waiting for another thread's
  // poll to end rather than skipping it, and forwarding what is another
  // process's), executes it and sends the ACKs it makes due. A NIC
  // acknowledges a request as it arrives; here a request still in the socket
  // when the application destroys its QP would find no QP, and its requester
  // would retransmit into nothing and end in RETRY_EXC_ERR. Bounded
  // (kRoceSettleBatches): a peer that keeps sending cannot hold it. Never
  // opens a port. Without any QP lock held.
  void SettleRoce() { ReadRocePortEmpty(/*execute=*/true); }
  // A QP needs attention outside the inline path (ring full, RNR wait).
  void NeedService(Qp* qp);
  // Called when new sends are outstanding: makes sure the progress thread
  // watches retransmit/RNR timers (wakes it only if it sleeps indefinitely).
  void WatchTimers();
  // A RoCE requester's timer (tail-loss probe or retransmission) is due at
  // `due_ns` (NowNs): a first transmission or progress restarted it. The
  // progress thread sleeps until then at the latest; it is woken only if it
  // planned to sleep past that (docs/design.md "Progress", timers).
  void TimerDueBy(uint64_t due_ns);
  // Called before an application blocks for an event (ibv_req_notify_cq):
  // the progress thread must take over the inbound ring now.
  void ApplicationMayBlock();
  // ibv_get_cq_event on a blocking channel with no event yet: the calling
  // thread waits on the inbound ring itself, drains what arrives and
  // returns when `channel`'s pipe holds an event token, read from
  // `nonblocking_fd` (a non-blocking descriptor of the pipe's read end) into
  // `token` (`len` bytes). One wake-up per message instead of two (the
  // progress thread's, then the pipe's). 1: a token was read; 0: another
  // thread of the process waits this way already (block in read() instead);
  // -1: errno set (EINTR: a signal).
  int WaitForChannelEvent(const void* channel, int nonblocking_fd, void* token, size_t len);
  // Whether the calling thread drains the ring for no verbs call of the
  // application's about this record: the progress thread, or a thread
  // waiting in ibv_get_cq_event. Such a drain may meet receive buffers the
  // application unmapped meanwhile (transport/datagram.cpp).
  static bool DrainingInBackground();
  // An event token was written to `channel`'s pipe: wakes the thread that
  // waits for it in WaitForChannelEvent, if one does (one load otherwise).
  void TokenWritten(const void* channel) {
    if (direct_waiter_.load(std::memory_order_seq_cst) == channel) WakeDirectWaiter();
  }

  // Sends a record to a peer's ring. false = ring full (retry later).
  bool Send(PeerLink& peer, const wire::RecordHeader& hdr, const void* payload, uint32_t len);
  bool SendGather(PeerLink& peer, const wire::RecordHeader& hdr, const iovec* parts, int nparts);

  // The RoCE wire's packet port (transport/roce), opened on first use;
  // nullptr when none can be (then no QP goes over RoCE).
  roce::PacketPort* packet_port() {
    return roce_port_ready_.load(std::memory_order_acquire)
               ? roce_port_view_.load(std::memory_order_acquire)
               : OpenPacketPort();
  }
  // Tests: an in-process port instead of the UDP one, and every RC/UC peer
  // over it (as SOFTRDMA_WIRE=roce). Before any QP uses the RoCE wire.
  void SetPacketPortForTesting(std::unique_ptr<roce::PacketPort> port);
  // One look at the timers as the progress thread's (CheckTimers), at `now`:
  // a test's stand-in for a thread that woke late.
  bool CheckTimersForTesting(uint64_t now) {
    uint64_t next_deadline = 0;
    return CheckTimers(now, &next_deadline);
  }
  // Whether RC/UC peers on this host go over RoCE too (SOFTRDMA_WIRE=roce).
  bool roce_forced() const;
  // A QP was attached to the RoCE wire: polls of the CQs poll the port too.
  // From now on the port is read (inline and by the progress thread, which
  // is woken if it sleeps without a timeout: a listener's process has
  // nothing else to wake it).
  void ActivateRoce();
  // Receives what the port holds and hands it to the QPs; sends the ACKs
  // that the burst made due. true if anything arrived. `by_app`: from a
  // verbs call, which looks only at every kRoceIdlePollStride-th call
  // (RoceLookDue), and at most once per kRoceIdleLookNs, once the port has
  // been empty for a while (system calls each time would cost a
  // busy-polling shm program whose UD QP merely listens on the wire).
  bool PollRoce(bool by_app = false);

  ~Engine();

 private:
  roce::PacketPort* OpenPacketPort();
  // One batch from `port` (roce_rx_lock_ held): hands it to the QPs, then
  // sends the ACKs it made due. Returns the datagrams delivered here.
  // execute false: our datagrams are dropped unread (at exit), others'
  // are still forwarded by the port.
  int PollRoceBatch(roce::PacketPort* port, bool execute = true);
  // SettleRoce's loop; execute false at exit (see Shutdown).
  void ReadRocePortEmpty(bool execute);
  // Peer's answer for a process whose segment cannot be used: says why on
  // stderr, once per process (ReportToUser), and returns nullptr: its QPs
  // are unreachable (peers_mutex_ held).
  std::shared_ptr<PeerLink> RefusePeer(ProcRef ref, pid_t pid, const std::string& reason,
                                       const std::string& fix);
  Engine() = default;
  static Engine* Create(Status* err);
  void CountPollAfterArm();
  void ProgressSlow();
  Status Init();
  void Shutdown();
  // `by_app`: drained from a verbs call, which may defer ACKs (DeferAcks).
  bool DrainRing(bool by_app);
  // Holding the consumer lock: executes what the ring holds committed now
  // and sends every ACK owed, none deferred (a QP is being destroyed).
  void DrainArrived();
  // Sends what a QP being destroyed still owes its requester, waiting a
  // bounded time for room in the requester's ring. Without the consumer
  // lock; `drain_own_ring`: drains ours between tries (see engine.cpp).
  void SendOwed(Qp& qp, bool drain_own_ring);
  // Executes one record. *held is the QP whose lock the caller's batch holds
  // (nullptr: none): kept while the records are for that QP, released before
  // any other, taken for the record's QP. The batch releases it at its end.
  void Dispatch(const shm::RecordView& view, Qp** held);
  // ConsumeBatch over Dispatch, one QP lock for each run of records to the
  // same QP (a stream of SENDs takes it once per batch, not per message).
  size_t DispatchBatch();
  void FlushAcks();
  bool DeferAcks();
  // Sends the ACKs a drain held back. false if the ring's consumer lock was
  // busy (its holder sends them at the end of its drain, or defers anew).
  bool FlushDeferredAcks();
  // The progress thread's side of DeferAcks, after announcing a sleep.
  void FlushAcksBeforeSleep();
  bool ServiceQps(uint64_t now, uint64_t* next_deadline);
  bool CheckTimers(uint64_t now, uint64_t* next_deadline);
  // One look at every live QP's timers (CheckTimers' passes).
  bool CheckQpTimers(uint64_t now, uint64_t* next_deadline, bool* ring_look_wanted);
  void ThreadMain();
  // What the progress thread knows about a polling application; its own
  // (ThreadMain's), kept across watches. See "The progress thread's states"
  // in engine.cpp.
  struct AppWatch {
    uint64_t seen_polls = 0;    // app_polls_ when the current window began
    uint64_t window_start = 0;  // NowNs() then
    uint64_t window = 0;        // its length
    uint64_t last_timer_check = 0;
    // The earliest retransmit deadline that check found (0: none): the
    // thread looks again then, not at its next tick, so that a timer is
    // not late by up to a tick and a window (docs/design.md "Progress").
    uint64_t timer_deadline = 0;
    // Announced on the ring while watching: the application leaves records
    // for the thread (it waits for memory, not for completions), so their
    // commits must wake it.
    bool on_ring = false;
    // Records the application drained itself since the thread last had to
    // (counted while on_ring): enough of them and the watch goes quiet.
    uint32_t app_drains = 0;
    // The RoCE port, watched like the ring (Engine::WatchRocePort): datagrams
    // found waiting get a grace in which a polling application takes them;
    // still there after it, they were left for the thread (the application
    // spins on memory that a WRITE in them is to write), which takes them and
    // from then on has the port's watcher wake it during the watch (on_port).
    bool on_port = false;
    uint32_t port_app_takes = 0;    // takes by the application since ours
    uint32_t port_empty_wakes = 0;  // wake-ups for datagrams it took first
    bool port_timing = false;       // datagrams are being given their grace
    uint64_t port_since = 0;        // ... since then
    uint64_t port_takes_seen = 0;   // roce_app_takes_ then
    uint64_t port_window_seen = 0;  // window_start at the last look
  };
  enum class WatchEnd { kStopping, kAppStopped, kAppMayBlock, kRecordLeft };
  // The progress thread's own state across rounds (ThreadMain's).
  struct ProgressLoop {
    AppWatch watch;
    bool watch_again = false;        // the last watch ended on a record left for us
    uint64_t roce_linger_until = 0;  // see kRoceLingerNs
    shm::UncoveredSleeps uncovered;  // sleeps not covered by an announcement
  };
  bool DoProgressWork(ProgressLoop* loop, uint64_t now, bool roce, uint64_t* next_deadline,
                      bool* timers_live);
  bool LingerOnRocePort(ProgressLoop* loop, uint64_t now);
  uint64_t ThreadSleepTimeout(uint64_t now, uint64_t next_deadline, bool timers_live, bool roce);
  void SleepUntilWork(ProgressLoop* loop, bool roce, uint64_t timeout);
  void StartWatchWindow(AppWatch* watch, uint64_t polls, uint64_t now);
  bool NextWatchWindow(AppWatch* watch, uint64_t now);
  void CheckTimersForWatch(AppWatch* watch, uint64_t now);
  static bool OnOneCpu();
  WatchEnd WatchPollingApplication(AppWatch* watch);
  // What one watch knows of the ring's head between its looks.
  struct HeadLook {
    uint64_t seen_pos = 0;     // the head position at the last look
    bool timing = false;       // a record at the head is being given its grace
    bool timed_ready = false;  // ... committed (its grace starts at the commit)
    uint64_t timed_pos = 0;
    uint64_t timed_since = 0;
    bool slept_on_ring = false;  // announced, with nothing ready at slept_pos
    uint64_t slept_pos = 0;
    // Quiet: the application drained a record we timed in this window.
    bool app_drained_timed = false;
    uint64_t window_seen = 0;  // AppWatch::window_start at the last look
  };
  bool RecordLeftAtHead(AppWatch* watch, HeadLook* look, uint64_t now, bool* ready,
                        uint64_t* deadline);
  void WatchSleep(AppWatch* watch, HeadLook* look, uint32_t word, int64_t timeout, bool ready);
  bool WatchRocePort(AppWatch* watch, uint64_t now, uint64_t* deadline);
  void ArmRoceWatcher();
  static void OnReclaim(ProcRef dead);
  friend void EngineAtExit();
  friend void EngineAfterFork();

  Registry registry_;
  ProcRef me_{};
  pid_t owner_pid_ = 0;
  shm::ShmRegion segment_;
  shm::Ring* ring_ = nullptr;
  std::unique_ptr<MrTable> mr_table_;
  std::unique_ptr<MemoryExporter> exporter_;
  std::atomic<uint32_t> next_pd_id_{1};

  // The process's engine (null until first use, and again in a fork child).
  static inline std::atomic<Engine*> current_{nullptr};

  // qp_by_qpn_ is read by the ring consumer without a lock: entries are
  // atomic, and UnregisterQp waits for the consumer lock after clearing an
  // entry, so no drain still holds a pointer to a QP being destroyed.
  std::unique_ptr<std::atomic<Qp*>[]> qp_by_qpn_;  // indexed by QPN; owned QPs only
  // Guards live_qps_ and the QPs that the timer scan and the service list
  // reach (not the drain path, see above).
  std::shared_mutex qp_map_mutex_;
  std::vector<Qp*> live_qps_;  // the same QPs, for the timer scan
  std::vector<Qp*> ack_list_;  // QPs with an ACK to send (under the ring's consumer lock)
  // ack_list_ holds ACKs a drain by the application left for later
  // (transport/responder.cpp, "Deferred ACKs"); the next drain, or the
  // progress thread, sends them.
  std::atomic<bool> acks_deferred_{false};

  std::mutex peers_mutex_;
  std::map<uint32_t, std::shared_ptr<PeerLink>> peers_;    // by slot
  std::set<std::pair<uint32_t, uint32_t>> refused_peers_;  // (slot, gen) already reported
  PeerDeathWatch death_watch_;

  SpinLock service_lock_;
  std::vector<Qp*> service_list_;
  std::atomic<bool> service_pending_{false};

  // Progress thread coordination (the state machine is described above
  // Engine::StartWatchWindow in engine.cpp). The thread always waits on the ring's
  // wake word, so Ring::Wake() is the one way to kick it.
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> app_polls_{0};
  // Set when the application armed a CQ (it may block on the channel next);
  // cleared by its next poll. While set, polling does not count as "the
  // application is polling".
  std::atomic<bool> app_may_block_{false};
  uint32_t polls_since_arm_ = 0;  // racy by design: only a heuristic
  enum ThreadState : uint32_t { kRunning, kSleepingForever, kSleepingTimed, kAppPolling };
  std::atomic<uint32_t> thread_state_{kRunning};
  // The channel whose event an application thread waits for on the ring
  // itself (WaitForChannelEvent), or null; one such thread at a time.
  std::atomic<const void*> direct_waiter_{nullptr};
  void WakeDirectWaiter();
  void LeaveDirectWait();
  // Set by posters when sends become outstanding; cleared by the progress
  // thread before it sleeps without a timeout (see WatchTimers).
  std::atomic<bool> timers_armed_{false};
  // The earliest due time posted by TimerDueBy since the progress thread's
  // last timer check (0: none; CheckTimers takes it), and the time the
  // thread's current sleep ends (UINT64_MAX: without a timeout; 0: it is
  // not sleeping, and looks at timer_due_posted_ before it does). A seq_cst
  // pair: either the poster sees the sleep's end, or the thread sees the
  // posted time (PlanSleep).
  std::atomic<uint64_t> timer_due_posted_{0};
  std::atomic<uint64_t> thread_wakes_at_{0};
  // Before a sleep of the progress thread until `until` (UINT64_MAX: no
  // timeout), after its PrepareToWait: publishes it and returns it lowered
  // to a posted due time. The caller stores 0 in thread_wakes_at_ after it.
  uint64_t PlanSleep(uint64_t until);
  // Whether the timers must be checked now: the deadline the last check
  // returned, or a due time posted since, has come.
  bool TimersDue(uint64_t deadline, uint64_t now) const;

  // The RoCE wire (transport/roce): its port, opened once; the flag that
  // makes Progress() poll it; the lock of its receive side (one poller at a
  // time; UnregisterQp takes it to know that no poll still uses a QP).
  std::mutex roce_port_mutex_;
  std::unique_ptr<roce::PacketPort> roce_port_;
  // roce_port_.get() for readers that hold no lock (packet_port()): a test's
  // SetPacketPortForTesting replaces the owner while the progress thread may
  // be asking whether there is a port at all.
  std::atomic<roce::PacketPort*> roce_port_view_{nullptr};
  std::atomic<bool> roce_port_ready_{false};
  bool roce_port_tried_ = false;
  bool roce_forced_for_testing_ = false;
  std::atomic<bool> roce_active_{false};
  SpinLock roce_rx_lock_;
  // Our segment's count of looks at the port (PeerLink::roce_polls), written
  // under roce_rx_lock_.
  uint64_t* roce_polls_word_ = nullptr;
  std::atomic<uint32_t> roce_empty_polls_{0};   // consecutive polls that found nothing
  std::atomic<uint32_t> roce_idle_skip_{0};     // verbs calls that pass an idle port still
  std::atomic<uint64_t> roce_idle_look_ns_{0};  // when a verbs call last looked at an idle port
  // When the port's current silence began (its kRoceIdlePolls-th empty poll
  // in a row): the thinned looks space out with the time since.
  std::atomic<uint64_t> roce_silence_since_ns_{0};
  // Polls by the application that took datagrams (WatchRocePort).
  std::atomic<uint64_t> roce_app_takes_{0};
  // Set by the port's watcher when it wakes the thread for a datagram,
  // cleared by the watch's look (WatchRocePort) and by the arming.
  std::atomic<bool> roce_watcher_woke_{false};
  // The port's readable fd, watched while the progress thread sleeps
  // (RoceWatchMain): set to 1 before a sleep, cleared after; the watcher
  // waits on it (futex) while 0, and in poll() on the fd while 1, and wakes
  // the thread through the ring's word when a datagram comes. So an idle
  // process sleeps without a timer, and a polling one pays nothing.
  std::atomic<uint32_t> roce_watch_armed_{0};
  std::atomic<int> roce_watch_fd_{-1};  // the port's ReadableFd(), -1: none (poll every ms)
  int roce_watch_stop_ = -1;            // eventfd that ends the watcher's poll()
  std::atomic<bool> roce_watch_quit_{false};
  std::thread roce_watch_thread_;
  void RoceWatchMain();
  void StartRoceWatch();
  void StopRoceWatch();
};

}  // namespace softrdma
