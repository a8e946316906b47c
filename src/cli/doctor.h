// `softrdma doctor` (see usage.h and docs/softrdma-command.md).
#pragma once

namespace softrdma::cli {

int Doctor(int argc, char** args);

}  // namespace softrdma::cli
