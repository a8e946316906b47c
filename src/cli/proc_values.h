// Small readers of /proc values shared by the namespace advice and the
// doctor's probes.
#pragma once

#include <string>

namespace softrdma::cli {

// The integer at the start of a file such as /proc/sys/user/max_user_namespaces;
// -1 when the file is absent or does not start with one.
int ReadIntFile(const char* path);

// The value of a "Name:<tab>value" line of /proc/self/status ("" if absent),
// e.g. StatusField("Seccomp") == "2".
std::string StatusField(const std::string& name);

}  // namespace softrdma::cli
