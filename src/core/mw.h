// Memory windows (ibv_alloc_mw). A window is an entry of the process's MR
// table (core/mr_table.h): unbound it opens nothing; a bind publishes a range
// of one MR under the window's rkey, with the window's own remote access, so
// peers validate it exactly like an MR rkey. Binding is a send-queue
// operation (transport/invalidate.cpp).
#pragma once

#include <infiniband/verbs.h>

namespace softrdma {

struct Mw {
  ibv_mw mw;  // first: the application's pointer converts back with a cast
  static Mw* From(ibv_mw* m) { return reinterpret_cast<Mw*>(m); }
};

}  // namespace softrdma
