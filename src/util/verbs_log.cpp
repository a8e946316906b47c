#include "util/verbs_log.h"

#include <cstdlib>
#include <new>

namespace softrdma {

uint32_t parse_verbs_log_level(const char* text) noexcept {
  if (text == nullptr || *text == '\0') return kVerbsLogNone;
  uint32_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return kVerbsLogNone;
    value = value * 10 + static_cast<uint32_t>(*p - '0');
    if (value > kVerbsLogDebug) value = kVerbsLogDebug;  // clamp, and no overflow
  }
  return value;
}

VerbsLog::VerbsLog(uint32_t level, const char* path) noexcept
    : level_(level), file_(stderr), owns_file_(false) {
  // Only open the file when something can be written: a library loaded into
  // every verbs process must not create files nobody asked to fill.
  if (path == nullptr || *path == '\0' || level == kVerbsLogNone) return;
  if (std::FILE* f = std::fopen(path, "ae")) {
    file_ = f;
    owns_file_ = true;
  }
}

VerbsLog::~VerbsLog() {
  if (owns_file_) std::fclose(file_);
}

void VerbsLog::vlog(uint32_t level, const char* fmt, va_list args) noexcept {
  if (fmt == nullptr || !verbs_log_enabled(level_, level)) return;
  char text[kMaxMessage];
  const int n = std::vsnprintf(text, sizeof(text), fmt, args);
  if (n < 0) return;
  const std::size_t len =
      static_cast<std::size_t>(n) < sizeof(text) ? static_cast<std::size_t>(n) : sizeof(text) - 1;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fwrite(text, 1, len, file_);
    std::fflush(file_);
  } catch (...) {
    // std::mutex::lock only throws on a broken mutex; losing one log line is
    // the right outcome for a logger.
  }
}

VerbsLog& process_verbs_log() noexcept {
  // Built in static storage on first use (thread-safe static init) and never
  // destroyed: providers may log from their own destructors after ours ran,
  // and placement new cannot fail the way a heap allocation could.
  alignas(VerbsLog) static unsigned char storage[sizeof(VerbsLog)];
  static VerbsLog* const log = new (storage) VerbsLog(
      parse_verbs_log_level(std::getenv("VERBS_LOG_LEVEL")), std::getenv("VERBS_LOG_FILE"));
  return *log;
}

}  // namespace softrdma
