// The verbs objects handed to applications. Each embeds the public rdma-core
// struct as its first member, so the pointer the application holds converts
// back to ours with a cast (the header inlines only ever see the public part).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include <infiniband/verbs.h>

#include "core/async_events.h"
#include "core/context_file.h"
#include "util/spinlock.h"

namespace softrdma {

// One opened device. rdma-core's inlines find the extended ops at a fixed
// negative offset from ibv_context, so the whole verbs_context is allocated
// and ibv_context is its last member.
struct Context {
  verbs_context vctx;
  AsyncEventQueue async_events;  // async_fd is its pipe's read end
  // What cmd_fd holds: the PDs and MRs of the context, by handle, for
  // ibv_import_* (core/context_file.h). Imported contexts share their
  // exporter's file.
  std::unique_ptr<ContextFile> file;

  ibv_context* verbs() { return &vctx.context; }
  static Context* From(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) -
                                      offsetof(verbs_context, context));
  }
};
static_assert(offsetof(Context, vctx) == 0);

struct Pd {
  ibv_pd pd;
  uint32_t id;                // unique in the process; MR entries record it
  std::atomic<int> users{0};  // MRs and QPs using it: dealloc fails with EBUSY
  // Made by ibv_import_pd: freeing it releases this handle only, the
  // exporter's PD stays (core/verbs_import.cpp).
  bool imported = false;
  static Pd* From(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }
};

struct Mr {
  ibv_mr mr;
  uint32_t pd_id;
  uint32_t access = 0;  // as registered (optional bits dropped); for rereg_mr
  uint64_t iova = 0;
  uint32_t extent = 0;  // exported extent holding its pages (core/memory_export.h), 0 = none
  // How ibv_import_mr made it (kOwn: ibv_reg_mr). An alias shares the
  // exporter's table entry (same process); a mirror is this process's entry
  // for another process's pages, mapped at mirror_map.
  enum class Origin : uint8_t { kOwn, kAlias, kMirror } origin = Origin::kOwn;
  void* mirror_map = nullptr;
  size_t mirror_bytes = 0;
  static Mr* From(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }
};

struct CompChannel {
  ibv_comp_channel ch;  // ch.fd = read end of a pipe of event tokens
  int write_fd = -1;
  // The pipe's read end opened a second time, non-blocking (a file
  // description of its own, so the application's blocking mode is
  // untouched): ibv_get_cq_event reads tokens through it while it waits on
  // the inbound ring (Engine::WaitForChannelEvent). -1: not available.
  int nonblocking_fd = -1;
  std::atomic<int> users{0};  // CQs using it: destroy fails with EBUSY
  static CompChannel* From(ibv_comp_channel* c) { return reinterpret_cast<CompChannel*>(c); }
};

// Raises an async event (QP fatal, CQ overrun, ...) of `object` (an ibv_qp,
// ibv_cq or ibv_srq as the type says) for ibv_get_async_event
// (core/async_events.h).
void PostAsyncEvent(Context* ctx, ibv_event_type type, void* object);

}  // namespace softrdma
