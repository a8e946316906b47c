// The records the shm wire carries between processes. They mirror the
// RoCE/IB transport (docs/rc-transport.md): a request carries a PSN and the
// destination QPN; the responder answers with a cumulative ACK or a NAK whose
// syndrome says why. One message = one PSN here, since the ring has no MTU:
// a PSN counts messages, not packets.
#pragma once

#include <cstdint>

namespace softrdma::wire {

enum class RecordType : uint8_t {
  kSend = 1,  // SEND / SEND_WITH_IMM request
  kAck = 2,   // ACK or NAK from a responder to a requester
  // One-sided operations (transport/one_sided.cpp). Requests carry a
  // OneSidedEth after the header. The initiator executes WRITE/READ/atomics
  // itself where it can; these records are the two-copy path, the
  // notification half of WRITE_WITH_IMM, and error notices.
  kWrite = 3,           // WRITE[_WITH_IMM]: data inline/fragments, or none (kFlagPlaced)
  kRead = 4,            // READ request, answered by kReadResponse records
  kAtomic = 5,          // CMP_AND_SWP / FETCH_AND_ADD, answered by kAtomicResponse
  kReadResponse = 6,    // READ data for the request with this PSN (fragments)
  kAtomicResponse = 7,  // the original value (OneSidedEth::compare_add)
  kRemoteError = 8,     // the initiator found an access violation: go to ERR
  kDatagram = 9,        // UD SEND / SEND_WITH_IMM (transport/datagram.cpp): never answered
  // XRC delivery to an SRQ of another process than the target QP's
  // (transport/xrc_forward.cpp): the target's process hands the request
  // over (an XrcForwardEth, then the request's own payload) and the SRQ's
  // process answers with the outcome (`syndrome`, `psn`).
  kXrcForward = 10,  // dst_qpn: the SRQ number; src_qpn: the target QP
  kXrcDone = 11,     // dst_qpn: the target QP
};

inline bool IsRequest(RecordType t) {
  return t == RecordType::kSend || t == RecordType::kWrite || t == RecordType::kRead ||
         t == RecordType::kAtomic || t == RecordType::kRemoteError;
}

// How a request's payload travels.
enum class PayloadMode : uint8_t {
  kInline = 0,    // the payload follows the header in the ring (small messages)
  kPull = 1,      // an iovec list of the requester's memory follows: the
                  // responder copies straight from it (cross-memory attach)
  kFragment = 2,  // one piece of a message pushed through the ring (two
                  // copies; used where cross-memory attach is refused)
};

enum RequestFlags : uint8_t {
  kFlagSolicited = 1 << 0,
  kFlagHasImm = 1 << 1,
  kFlagLastFragment = 1 << 2,
  kFlagPlaced = 1 << 3,      // kWrite: the initiator already wrote the data itself
  kFlagCmpSwap = 1 << 4,     // kAtomic: compare-and-swap (else fetch-and-add)
  kFlagInvalidate = 1 << 5,  // kSend: SEND with Invalidate, the rkey in `imm`
  // kSend: the record also carries the sender's cumulative ACK for the
  // receiver's requests (`ack_psn`), as if a kAck record had come just
  // before it. A responder keeps its ACK back briefly so that its own next
  // request on the QP (the reply of a ping-pong) can carry it: one record
  // fewer each way (transport/responder.cpp, "Deferred ACKs").
  kFlagAck = 1 << 6,
};

// ACK/NAK syndromes (our own numbering; the mapping to work-completion
// statuses at the requester is in transport/completer.cpp).
enum class Syndrome : uint8_t {
  kAck = 0,
  kRnrNak = 1,             // no receive WQE: retry after the RNR timer
  kNakInvalidRequest = 2,  // e.g. message longer than the receive buffer
  kNakRemoteAccess = 3,    // rkey/bounds/access violation at the responder
  kNakRemoteOp = 4,        // responder could not complete (e.g. bad receive lkey)
  kNakNoQp = 5,            // destination QP does not exist (a NIC would time out)
  kPullRefused = 6,        // cross-memory attach refused: resend by fragments
  kNakSequence = 7,        // PSN sequence error: resend from the given PSN
};

struct RecordHeader {
  RecordType type;
  PayloadMode mode;
  uint8_t flags;
  Syndrome syndrome;  // kAck records
  uint32_t src_qpn;
  uint32_t dst_qpn;
  uint32_t psn;          // request: its PSN; ack: the PSN acknowledged / NAKed
  uint32_t src_slot;     // requester's process slot (registry)
  uint32_t src_gen;      // ... and its generation
  uint32_t imm;          // immediate data, network byte order as given by the user
  uint32_t total_len;    // whole message length
  uint32_t frag_offset;  // kFragment: where this piece goes
  uint32_t payload_len;  // bytes following the header (inline data, a fragment, or iovecs)
  uint32_t rnr_timer;    // kRnrNak: the responder's min_rnr_timer code;
                         // requests of an XRC QP: the target SRQ number (XRCETH)
  uint32_t ack_psn;      // kFlagAck: every request up to this PSN is acknowledged
};
static_assert(sizeof(RecordHeader) == 48);

// Follows the header of one-sided requests (like RoCE's RETH/AtomicETH).
struct OneSidedEth {
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t reserved;
  uint64_t compare_add;
  uint64_t swap;
};
static_assert(sizeof(OneSidedEth) == 32);

// Follows the header of kXrcForward: who sent the request (to pull from it
// and to name it in the completion) and the target QP's domain, checked
// exactly by the SRQ's process.
struct XrcForwardEth {
  uint32_t requester_slot;
  uint32_t requester_gen;
  uint32_t requester_qpn;
  uint32_t reserved;
  uint64_t domain_dev;
  uint64_t domain_ino;
};
static_assert(sizeof(XrcForwardEth) == 32);

// An element of the kPull iovec list: bytes of the requester's memory, and
// the requester's exported extent holding them (core/memory_export.h; 0 =
// none), through which the responder can copy them without a system call.
struct RemoteIov {
  uint64_t addr;
  uint32_t len;
  uint32_t extent;
};

}  // namespace softrdma::wire
