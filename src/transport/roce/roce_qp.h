// The RoCEv2 transport: the three roles of an RC/UC QP (requester,
// completer, responder; rc-transport.md) over packets, for QPs whose peer is
// reached over UDP (docs/design.md "RoCEv2 transport"). What is not about
// packets is shared with the shm wire: WR validation and queueing
// (requester.cpp), the receive WQE choice (recv_source.h), MR and rkey checks
// (core/mr_table.h), completions and the NAK -> IBV_WC_* mapping
// (completer.cpp), errors and flushes (qp_errors.cpp), the timer encodings
// (RnrTimerNs, AckTimeoutNs). Every function expects the caller to hold
// qp.lock unless it says otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/qp.h"
#include "transport/responder_stall.h"
#include "wire/roce/icrc.h"
#include "wire/roce/packet_port.h"

namespace softrdma {
class Engine;
struct PeerLink;
}  // namespace softrdma

namespace softrdma::transport::roce {

using softrdma::roce::InDatagram;
using softrdma::roce::IpEndpoint;
using softrdma::roce::NetworkHeaders;
using softrdma::roce::PacketPort;

enum class InMessage : uint8_t { kNone, kSend, kWrite };

struct RoceQp {
  NetworkHeaders net;  // this QP's datagrams: source and destination GIDs
  IpEndpoint to;       // the peer's address, UDP port 4791
  uint32_t mtu = 1024;

  // --- requester / completer
  uint32_t tx_packet = 0;  // packets of sq.at(sq_tx) already sent
  uint32_t comp_psn = 0;   // oldest PSN not yet acknowledged
  // The window (docs/design.md "A window that shrinks at a loss"): at most
  // this many PSNs unacknowledged. kMaxWindow (rxe's) at the start; halved
  // at each go-back for a loss (a sequence NAK acted on, a timer expiry),
  // down to kMinWindow; one more for each `window` PSNs acknowledged since
  // (window_acked). Go-back-N sends again what a pass sent past its gap, up
  // to a window: at 5% loss 6.6 packets per packet needed with 128, 3.6
  // with 64. A floor of 32 (still an AckReq packet in every window: one
  // every 32 of a message) brought too few NAK repeats past a gap, so that
  // more gaps waited for the probes and the timer (bench/roce_loss.sh
  // drop10: 38-43 timer expiries, 35 MB/s against ~95).
  static constexpr uint32_t kMaxWindow = 128;
  static constexpr uint32_t kMinWindow = 64;
  uint32_t window = kMaxWindow;
  uint32_t window_acked = 0;
  void ShrinkWindow() {
    window = window / 2 < kMinWindow ? kMinWindow : window / 2;
    window_acked = 0;
  }
  void GrowWindow(uint32_t acknowledged) {
    if (window >= kMaxWindow) return;
    window_acked += acknowledged;
    while (window_acked >= window && window < kMaxWindow) {
      window_acked -= window;
      ++window;
    }
  }
  uint32_t rd_atomic_out = 0;
  bool read_gap_retried = false;  // READ responses went missing: retried once per gap
  // Repeated sequence NAKs (docs/design.md "Repeated sequence NAKs"): the
  // responder NAKs a missing PSN at the first packet past it and again at
  // every AckReq packet past it, so one go-back-N pass may bring several
  // NAKs for the same PSN; only the first is acted on. stale_naks_left: the
  // NAKs for stale_nak_psn still owed by the packets sent before the last
  // go-back (its AckReq packets past that PSN; ignored as they come).
  // last_nak_psn: the PSN of the last sequence NAK acted on (the responder's
  // first NAK for a gap, at a packet without AckReq maybe, came already).
  uint32_t stale_nak_psn = 0;
  uint32_t stale_naks_left = 0;
  uint32_t last_nak_psn = 0;
  bool last_nak_valid = false;
  // The gap a sequence NAK (the NAK itself, not a repeat) named, open while
  // comp_psn stays at nak_gap_psn (the completer's AdvanceComp closes it):
  // then, after a tail probe, or from a peer that does not advertise
  // credits (below), an ACK with credit code 30 that makes no progress is
  // our responder's repeat of that NAK; any other is an ordinary ACK
  // (docs/design.md "Repeated sequence NAKs").
  uint32_t nak_gap_psn = 0;
  bool nak_gap_open = false;
  // The credit codes of the peer's ACKs: 31 ("invalid": a responder on an
  // SRQ, or ours) and 0-29 (real credit counts). A peer that sent 31 and
  // never a count does not advertise credits, so its code 30 can only be
  // our responder's NAK repeat.
  bool peer_credits_invalid_seen = false;
  bool peer_credit_count_seen = false;
  // Tail-loss probes (docs/design.md "Tail-loss probe"): while a wait for
  // progress lasts, an eighth of `timeout` without any and again a quarter,
  // the last packet sent goes again with AckReq. probes_sent: since the last
  // progress; probes_in_pass: those of the current go-back-N pass, AckReq
  // packets that AckReqPacketsSentAfter counts (all of them: one at or
  // before the NAKed PSN brings no NAK, and counting it only makes the
  // count high, the safe side).
  static constexpr uint32_t kMaxProbes = 2;
  uint32_t probes_sent = 0;
  uint32_t probes_in_pass = 0;
  // A peer that is a process of this host (ResponderNotScheduled in
  // roce_requester.cpp): its link, resolved at the first timer expiry, and
  // its count of looks at its port at the last expiry (peer_stall.mark).
  std::shared_ptr<PeerLink> local_peer;
  ResponderStallClock peer_stall;

  // --- responder
  uint32_t msn = 0;
  bool nak_sent = false;  // a sequence (or RNR) NAK was sent for epsn, not yet answered
  // After an RNR NAK the rest of that burst is dropped without sequence
  // NAKs (the requester goes back after its RNR wait) until a packet at or
  // behind the last one seen (nak_last_psn) shows the burst is over.
  bool rnr_quiet = false;
  uint32_t nak_last_psn = 0;
  bool ack_due = false;  // a coalesced ACK for epsn - 1
  bool uc_dropping = false;
  InMessage in_message = InMessage::kNone;
  uint64_t in_offset = 0;  // bytes of the message placed so far
  uint64_t write_va = 0;
  uint32_t write_rkey = 0;
  uint32_t write_length = 0;
};

// Per-reason counters of received packets dropped, and of the protocol's
// events, for this process (read by tests and, later, the softrdma CLI).
struct Counters {
  std::atomic<uint64_t> tx_packets{0};
  std::atomic<uint64_t> rx_packets{0};
  std::atomic<uint64_t> rx_gsi{0};               // UD packets to QP1, handed to the GSI forwarder
  std::atomic<uint64_t> drop_short{0};           // EMSGSIZE
  std::atomic<uint64_t> drop_bad_icrc{0};        // EILSEQ
  std::atomic<uint64_t> drop_unknown_opcode{0};  // EOPNOTSUPP, or XRC/RD/CNP
  std::atomic<uint64_t> drop_bad_header{0};      // TVer, pad, payload length for the MTU
  std::atomic<uint64_t> drop_no_qp{0};           // no QP of ours has that number, or not RoCE
  std::atomic<uint64_t> drop_wrong_qp{0};        // QP state, type, or sender not its peer
  std::atomic<uint64_t> drop_psn_window{0};      // out of sequence (after its NAK), or stale
  std::atomic<uint64_t> drop_unsolicited_response{0};
  std::atomic<uint64_t> retransmits{0};  // go-back-N restarts (timeout, NAK, implied NAK)
  std::atomic<uint64_t> timeouts{0};     // retransmit timer expiries (restarts by the timer)
  std::atomic<uint64_t> tail_probes{0};  // last packets sent again with AckReq before the timer
  std::atomic<uint64_t> timeouts_not_counted{0};  // of those: the local peer had no CPU
  std::atomic<uint64_t> seq_naks_received{0};
  std::atomic<uint64_t> duplicates{0};  // duplicate requests answered
  std::atomic<uint64_t> seq_naks_sent{0};
  std::atomic<uint64_t> seq_naks_repeated{0};  // of those: again for the same PSN (AckReq packets)
  std::atomic<uint64_t> seq_naks_stale{0};     // received and ignored (see stale_naks_left)
  std::atomic<uint64_t> rnr_naks_sent{0};
  std::atomic<uint64_t> send_refused{0};  // the port took fewer datagrams than offered
  std::atomic<uint64_t> send_errors{0};   // datagrams the network refused for good: lost
};
Counters& GetCounters();
// The counters as "name=value" pairs on one line, for SOFTRDMA_ROCE_STATS.
std::string FormatCounters();

// The process-wide wire choice (docs/design.md): SOFTRDMA_WIRE=roce sends
// every RC/UC peer over UDP, even one on this host.
bool WireForcedToRoce();

// At RTR: makes `qp` a RoCE QP (qp.roce) if the engine has a packet port.
// false: none can be opened (the QP then behaves as towards an unreachable
// peer, RETRY_EXC_ERR).
bool Attach(Engine& engine, Qp& qp);
// RESET: forgets the connection's state.
void Detach(Qp& qp);
// ERR: drops a message being received; sends the ACK owed for what was
// executed before (a NIC sent it on arrival: the requester of a message we
// placed must not fail it).
void OnError(Engine& engine, Qp& qp);

// Requester: sends queued WQEs as packets until the SQ is empty, the window
// (or max_rd_atomic) is full, a fence waits, or the port is full.
void Transmit(Engine& engine, Qp& qp);
// Deferred work (port full, RNR wait). As transport::Service.
bool Service(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline);
// Retransmit timer. As transport::CheckTimers.
bool CheckTimers(Engine& engine, Qp& qp, uint64_t now, uint64_t* deadline);

// UD over RoCE (roce_datagram.cpp): SQ entry `index` as one packet.
enum class DatagramTx { kSent, kBlocked, kBadSge };
DatagramTx TransmitDatagram(Engine& engine, Qp& qp, uint32_t index);

// Receive: one UDP payload. Checks it (codec, ICRC, QP) and hands it to the
// responder or the completer of its QP. Without any QP lock held; QPs that
// owe a coalesced ACK afterwards are appended to `acks` (once each).
void OnDatagram(Engine& engine, const InDatagram& datagram, std::vector<Qp*>* acks);
// Sends the coalesced ACK a QP owes (qp.lock held).
void SendOwedAck(Engine& engine, Qp& qp);

// Internal to the transport (roce_*.cpp).
void OnRequestPacket(Engine& engine, Qp& qp, const struct PacketIn& in);
void OnResponsePacket(Engine& engine, Qp& qp, const struct PacketIn& in);

}  // namespace softrdma::transport::roce
