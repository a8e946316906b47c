#include "util/log.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace softrdma {

static LogLevel ParseLevel(const char* s) {
  if (!s) return LogLevel::kNone;
  if (!strcmp(s, "debug")) return LogLevel::kDebug;
  if (!strcmp(s, "info")) return LogLevel::kInfo;
  if (!strcmp(s, "warn")) return LogLevel::kWarn;
  if (!strcmp(s, "error")) return LogLevel::kError;
  return LogLevel::kNone;
}

LogLevel CurrentLogLevel() {
  static const LogLevel level = ParseLevel(getenv("SOFTRDMA_LOG"));
  return level;
}

namespace {

void VPrint(LogLevel level, const char* fmt, va_list ap) {
  static const char* const kNames[] = {"", "error", "warn", "info", "debug"};
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "softrdma[%d] %s: ", getpid(), kNames[static_cast<int>(level)]);
  vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  fprintf(stderr, "%s\n", buf);
}

}  // namespace

void LogPrintf(LogLevel level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VPrint(level, fmt, ap);
  va_end(ap);
}

void ReportToUser(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VPrint(LogLevel::kError, fmt, ap);
  va_end(ap);
}

}  // namespace softrdma
