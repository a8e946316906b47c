// The debug log behind the exported __verbs_log (IBVERBS_PRIVATE_34), which
// vendor providers such as libefa call on error paths. Configured like
// rdma-core's: $VERBS_LOG_LEVEL selects the most verbose level printed,
// $VERBS_LOG_FILE the file appended to (stderr when unset or not openable).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace softrdma {

// Levels as providers pass them (rdma-core's VERBS_LOG_* numbering).
enum VerbsLogLevel : uint32_t {
  kVerbsLogNone = 0,
  kVerbsLogErr = 1,
  kVerbsLogWarn = 2,
  kVerbsLogInfo = 3,
  kVerbsLogDebug = 4,
};

// $VERBS_LOG_LEVEL as a level: a decimal number, clamped to kVerbsLogDebug;
// unset, empty, negative or not entirely a number gives kVerbsLogNone, so a
// typo silences the log rather than enabling debug spam.
uint32_t parse_verbs_log_level(const char* text) noexcept;

// Level 0 ("none") is never printed, even when the configured level is high.
constexpr bool verbs_log_enabled(uint32_t configured, uint32_t level) noexcept {
  return level != kVerbsLogNone && level <= configured;
}

class VerbsLog {
 public:
  // `path` nullptr or unopenable: log to stderr. The file is opened once
  // here, in append mode, and closed by the destructor.
  VerbsLog(uint32_t level, const char* path) noexcept;
  ~VerbsLog();
  VerbsLog(const VerbsLog&) = delete;
  VerbsLog& operator=(const VerbsLog&) = delete;

  uint32_t level() const noexcept { return level_; }

  // Formats and writes one message if `level` is enabled. A message is
  // written with a single fwrite under a lock so concurrent callers never
  // interleave; longer than kMaxMessage bytes is truncated. Never fails:
  // a nullptr `fmt` is ignored, write errors are dropped.
  void vlog(uint32_t level, const char* fmt, va_list args) noexcept;

  static constexpr std::size_t kMaxMessage = 1024;

 private:
  uint32_t level_;
  std::FILE* file_;
  bool owns_file_;
  std::mutex mutex_;
};

// The process-wide log, configured from the environment on first use.
VerbsLog& process_verbs_log() noexcept;

}  // namespace softrdma
