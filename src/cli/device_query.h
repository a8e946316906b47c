// Reads DeviceSnapshots from the libibverbs.so.1 this program is linked with
// (softrdma's: the executable's RPATH points at the libraries installed or
// built next to it) and tells which library file that is.
#pragma once

#include <string>
#include <vector>

#include "cli/device_snapshot.h"

namespace softrdma::cli {

// Every device the library lists, fully queried. Returns false with a
// one-line reason in `error` when the list or a query fails.
bool QueryDevices(std::vector<DeviceSnapshot>* out, std::string* error);

// Directory of the libibverbs.so.1 actually loaded (from dladdr), "" if it
// cannot be told. `softrdma run` puts it first on LD_LIBRARY_PATH, so the
// launched programs load the same library that was queried.
std::string LoadedVerbsLibraryDir();

}  // namespace softrdma::cli
