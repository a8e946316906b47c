// Measurements `softrdma doctor` makes. The probes that try something
// (cross-memory attach, the namespaces of `softrdma run`) do it in child
// processes, so the doctor itself changes nothing.
#pragma once

#include "cli/doctor_findings.h"

namespace softrdma::cli {

LibraryFacts ProbeLibrary();
ShmFacts ProbeShm();
CmaFacts ProbeCma();
// `as_unprivileged_user`: the probing child first becomes nobody (65534),
// which only root can do; tells whether ordinary users can use `run`.
RunProbe ProbeRun(bool as_unprivileged_user);

}  // namespace softrdma::cli
