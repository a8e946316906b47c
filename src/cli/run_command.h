// `softrdma run [--] CMD [ARGS...]`: runs CMD on softrdma (see
// docs/softrdma-command.md). On success it does not return: CMD replaces
// this process, so CMD's exit status or signal is the caller's to see.
#pragma once

namespace softrdma::cli {

// `args` are the words after "run". Returns an exit status of exit_codes.h
// only when CMD could not be started.
int RunCommand(int argc, char** args);

}  // namespace softrdma::cli
