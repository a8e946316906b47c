// The message for a shared-memory object softrdma cannot use (a damaged
// registry, one of another layout version or of another user, a peer's
// segment it cannot read): the file, the reason and what to do, on one line,
// so that a failing ibv_open_device or an unreachable peer explains itself.
#pragma once

#include <string>

namespace softrdma {

// The usual fix for an object of this user and namespace.
inline constexpr char kRemoveItOrSetNamespace[] =
    "remove it once no softrdma process uses it, or set SOFTRDMA_NAMESPACE to use another";

// The file behind a POSIX shm name ("/x" -> "/dev/shm/x").
std::string ShmPath(const std::string& shm_name);

// "<file>: <reason>; <fix>".
std::string UnusableShm(const std::string& shm_name, const std::string& reason,
                        const std::string& fix = kRemoveItOrSetNamespace);

}  // namespace softrdma
