// __verbs_log (IBVERBS_PRIVATE_34): the debug log providers write through,
// e.g. libefa when asked about a device that is not an EFA device. Configured
// by $VERBS_LOG_LEVEL and $VERBS_LOG_FILE (util/verbs_log.h).
#include <cstdarg>
#include <cstdint>

#include "abi/verbs/symver.h"
#include "util/verbs_log.h"

struct verbs_context;

extern "C" {

// `ctx` is not dereferenced: providers pass whatever context they have, and
// on the paths that log it may be half-built or not ours at all.
SOFTRDMA_EXPORT void __verbs_log(struct verbs_context* /*ctx*/, uint32_t level, const char* fmt,
                                 ...) __attribute__((format(printf, 3, 4)));

SOFTRDMA_EXPORT void __verbs_log(struct verbs_context* /*ctx*/, uint32_t level, const char* fmt,
                                 ...) {
  softrdma::VerbsLog& log = softrdma::process_verbs_log();
  if (!softrdma::verbs_log_enabled(log.level(), level)) return;  // skip va_start
  va_list args;
  va_start(args, fmt);
  log.vlog(level, fmt, args);
  va_end(args);
}

}  // extern "C"
