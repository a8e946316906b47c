// Device and port limits of softrdma0: the one place that says what the
// implementation really supports. ibv_query_device/port report these values
// and every verb validates against them.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

namespace softrdma::limits {

inline constexpr uint8_t kPortCount = 1;
inline constexpr uint8_t kPortNum = 1;  // ports are numbered from 1
inline constexpr uint16_t kPkeyTableLen = 1;
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr int kGidTableLen = 16;  // slots; unused ones read as zero GIDs

inline constexpr int kMaxQp = 65536;
inline constexpr int kMaxQpWr = 16384;
inline constexpr int kMaxSge = 32;
inline constexpr int kMaxInlineData = 1024;
inline constexpr int kMaxCq = 65536;
inline constexpr int kMaxCqe = (1 << 20) - 1;
inline constexpr int kMaxMr = (1 << 16) - 1;  // MR table slots per process (index 0 unused)
inline constexpr int kMaxPd = 1 << 20;
inline constexpr uint64_t kMaxMrSize = 1ull << 40;
inline constexpr uint32_t kMaxMsgSize = 1u << 31;  // 2 GiB, as rxe
inline constexpr int kMaxQpRdAtom = 128;
inline constexpr int kMaxQpInitRdAtom = 128;
inline constexpr int kMaxSrq = 65536;
inline constexpr int kMaxSrqWr = 16384;
inline constexpr int kMaxSrqSge = 32;
inline constexpr int kMaxAh = 65536;  // per process; an AH is a small heap object
inline constexpr ibv_mtu kMaxMtu = IBV_MTU_4096;
inline constexpr ibv_mtu kActiveMtu = IBV_MTU_4096;
inline constexpr uint64_t kPageSizeCap = 0xfffff000ull;  // 4 KiB and up

// qp_access_flags a QP may be given through ibv_modify_qp.
inline constexpr unsigned kSupportedQpAccess =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace softrdma::limits
