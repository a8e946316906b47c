// Diagnostics to stderr, off by default so that programs under test print
// exactly what they print on real hardware. SOFTRDMA_LOG=error|warn|info|debug
// turns them on.
#pragma once

namespace softrdma {

enum class LogLevel { kNone = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

LogLevel CurrentLogLevel();
void LogPrintf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// One "softrdma[<pid>] error: ..." line on stderr whatever SOFTRDMA_LOG says:
// only for a condition the user must act on before the device can work (a
// shared-memory object that cannot be used), which an errno alone would not
// explain.
void ReportToUser(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace softrdma

#define SOFTRDMA_LOG(level, ...)                                       \
  do {                                                                 \
    if (::softrdma::CurrentLogLevel() >= ::softrdma::LogLevel::level)  \
      ::softrdma::LogPrintf(::softrdma::LogLevel::level, __VA_ARGS__); \
  } while (0)
