// Exit statuses of the softrdma command (documented in docs/softrdma-command.md).
// `softrdma run` passes its command's status through unchanged, so its own
// failures use the high codes that env(1) and timeout(1) use for the same
// purpose and that ordinary programs avoid.
#pragma once

namespace softrdma::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;  // bad subcommand or option (not `run`)

// `softrdma doctor`: every check passed / softrdma works with limitations /
// something softrdma needs is missing.
inline constexpr int kExitDoctorWarnings = 1;
inline constexpr int kExitDoctorFailures = 3;

// `softrdma run`: the system refuses the namespaces `run` needs; any other
// failure of softrdma before the command started (usage included); the
// command exists but could not be executed; the command was not found.
inline constexpr int kExitNamespacesRefused = 124;
inline constexpr int kExitRunFailed = 125;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

}  // namespace softrdma::cli
