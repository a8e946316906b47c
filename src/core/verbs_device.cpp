// Device-level verbs: discovery, open/close, queries, async events, fork.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/objects.h"
#include "core/qp.h"
#include "core/srq.h"
#include "core/verbs.h"
#include "transport/engine.h"
#include "util/log.h"

namespace softrdma {

namespace {

// The QP, CQ or SRQ an event is about: its counts and its context. Port
// and device events name none.
struct EventObject {
  AsyncEventCount* count = nullptr;
  Context* ctx = nullptr;
};

EventObject ObjectOf(ibv_event_type type, void* object) {
  if (!object) return {};
  switch (type) {
    case IBV_EVENT_CQ_ERR: {
      Cq* cq = Cq::From(static_cast<ibv_cq*>(object));
      return {&cq->async_events, cq->ctx()};
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      Srq* srq = Srq::From(static_cast<ibv_srq*>(object));
      return {&srq->async_events, srq->ctx()};
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      Qp* qp = Qp::From(static_cast<ibv_qp*>(object));
      return {&qp->async_events, qp->ctx};
    }
    default:
      return {};
  }
}

}  // namespace

void PostAsyncEvent(Context* ctx, ibv_event_type type, void* object) {
  ctx->async_events.Post(type, object, ObjectOf(type, object).count);
}

}  // namespace softrdma

namespace softrdma::verbs {

namespace {

bool ValidPort(uint32_t port) {
  return port == limits::kPortNum;
}

// Every public entry that takes a context checks it came from us: a context
// of another library would be garbage to us.
bool ValidContext(ibv_context* c) {
  return c && c->device == Device::Get().verbs_device();
}

}  // namespace

ibv_device** GetDeviceList(int* num_devices) {
  Device& dev = Device::Get();
  dev.RefreshGids();
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = dev.verbs_device();
  if (num_devices) *num_devices = 1;
  return list;
}

void FreeDeviceList(ibv_device** list) {
  free(list);
}

const char* GetDeviceName(ibv_device* device) {
  if (!device) {
    errno = EINVAL;
    return nullptr;
  }
  return device->name;
}

__be64 GetDeviceGuid(ibv_device* device) {
  if (!Device::IsOurs(device)) {
    errno = EINVAL;
    return 0;
  }
  return Device::Get().node_guid();
}

int GetDeviceIndex(ibv_device* device) {
  if (!Device::IsOurs(device)) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

namespace {

// A context over `file` whose descriptor is `cmd_fd` (closed with the
// context; on failure it is left to the caller, as ibv_import_device does).
ibv_context* NewContext(ibv_device* device, int cmd_fd, std::unique_ptr<ContextFile> file) {
  Status st;
  if (!Engine::Get(&st)) {
    errno = st.code() ? st.code() : EIO;
    return nullptr;
  }
  auto* ctx = new (std::nothrow) Context();
  if (!ctx) {
    errno = ENOMEM;
    return nullptr;
  }
  ctx->file = std::move(file);
  int async_fd = -1;
  if (int e = ctx->async_events.Open(&async_fd)) {
    delete ctx;
    errno = e;
    return nullptr;
  }

  verbs_context& v = ctx->vctx;
  ibv_context& c = v.context;
  c.device = device;
  c.cmd_fd = cmd_fd;
  c.async_fd = async_fd;
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  // The header inlines reach the extended ops only if this marker is set and
  // `sz` covers them.
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  v.sz = sizeof(verbs_context);
  c.ops.poll_cq = PollCq;
  c.ops.req_notify_cq = ReqNotifyCq;
  c.ops.post_send = PostSend;
  c.ops.post_recv = PostRecv;
  c.ops.post_srq_recv = PostSrqRecv;
  c.ops.alloc_mw = AllocMw;  // memory windows (verbs_mw.cpp)
  c.ops.dealloc_mw = DeallocMw;
  c.ops.bind_mw = BindMw;
  v.create_srq_ex = CreateSrqEx;
  v.get_srq_num = GetSrqNum;
  // XRC (xrcd.cpp, verbs_xrc.cpp). close_xrcd must be set: ibv_close_xrcd
  // calls it without checking.
  v.open_xrcd = OpenXrcd;
  v.close_xrcd = CloseXrcd;
  v.open_qp = OpenQp;
  v.query_port = QueryPort;
  v.query_device_ex = QueryDeviceEx;
  // Extended verbs (verbs_qp_ex.cpp, verbs_cq_ex.cpp).
  v.create_qp_ex = CreateQpEx;
  v.create_cq_ex = CreateCqEx;
  v.query_rt_values = QueryRtValues;
  return &c;
}

}  // namespace

ibv_context* OpenDevice(ibv_device* device) {
  if (!Device::IsOurs(device)) {
    errno = ENODEV;
    return nullptr;
  }
  // cmd_fd is the file other contexts import this one's objects from.
  auto file = std::make_unique<ContextFile>();
  int cmd_fd = file->Create();
  if (cmd_fd < 0) return nullptr;
  ibv_context* c = NewContext(device, cmd_fd, std::move(file));
  if (!c) {
    int e = errno;
    close(cmd_fd);
    errno = e;
  }
  return c;
}

ibv_context* ImportDevice(int cmd_fd) {
  auto file = std::make_unique<ContextFile>();
  if (int rc = file->Attach(cmd_fd)) {
    errno = rc;
    return nullptr;
  }
  return NewContext(Device::Get().verbs_device(), cmd_fd, std::move(file));
}

int CloseDevice(ibv_context* context) {
  if (!ValidContext(context)) return EINVAL;
  Context* ctx = Context::From(context);
  close(context->cmd_fd);
  close(context->async_fd);  // the queue closes its own descriptors
  pthread_mutex_destroy(&context->mutex);
  delete ctx;
  return 0;
}

int QueryDevice(ibv_context* context, ibv_device_attr* attr) {
  if (!ValidContext(context) || !attr) return EINVAL;
  Device::Get().QueryDevice(attr);
  return 0;
}

int QueryDeviceEx(ibv_context* context, const ibv_query_device_ex_input* input,
                  ibv_device_attr_ex* attr, size_t attr_size) {
  if (!ValidContext(context) || !attr) return EINVAL;
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex full;
  memset(&full, 0, sizeof full);
  Device::Get().QueryDevice(&full.orig_attr);
  full.phys_port_cnt_ex = limits::kPortCount;
  full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
  // Completion timestamps are CLOCK_MONOTONIC nanoseconds: a 64-bit counter
  // ticking at 1 GHz (hca_core_clock is in kHz). Everything else of the
  // extended attributes (ODP, TSO, RSS, packet pacing, tag matching, CQ
  // moderation, device memory, PCI atomics) is absent and stays zero.
  full.completion_timestamp_mask = UINT64_MAX;
  full.hca_core_clock = 1000000;
  // Callers built against older headers pass a smaller struct: fill only
  // what they have room for.
  memcpy(attr, &full, attr_size < sizeof full ? attr_size : sizeof full);
  return 0;
}

int QueryPort(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  if (!ValidContext(context) || !attr) return EINVAL;
  if (!ValidPort(port_num)) return EINVAL;
  ibv_port_attr full;
  Device::Get().QueryPort(&full);
  memcpy(attr, &full, len < sizeof full ? len : sizeof full);
  return 0;
}

int QueryGid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (!ValidContext(context) || !gid || !ValidPort(port_num)) return EINVAL;
  if (index < 0 || index >= limits::kGidTableLen) return EINVAL;
  GidEntry e;
  // An empty slot reads as the zero GID, as rdma-core reports it.
  *gid = Device::Get().GidAt(index, &e) ? e.gid : ibv_gid{};
  return 0;
}

namespace {

void FillGidEntry(const GidEntry& e, uint32_t index, ibv_gid_entry* out) {
  memset(out, 0, sizeof *out);
  out->gid = e.gid;
  out->gid_index = index;
  out->port_num = limits::kPortNum;
  out->gid_type = IBV_GID_TYPE_ROCE_V2;
  out->ndev_ifindex = e.ifindex;
}

}  // namespace

int QueryGidEx(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
               uint32_t flags, size_t entry_size) {
  if (!ValidContext(context) || !entry || flags || !ValidPort(port_num)) return EINVAL;
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (gid_index >= static_cast<uint32_t>(limits::kGidTableLen)) return EINVAL;
  GidEntry e;
  if (!Device::Get().GidAt(static_cast<int>(gid_index), &e)) return ENODATA;
  FillGidEntry(e, gid_index, entry);
  return 0;
}

ssize_t QueryGidTable(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                      uint32_t flags, size_t entry_size) {
  if (!ValidContext(context) || flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  std::vector<GidEntry> gids = Device::Get().Gids();
  size_t valid = 0;
  for (const GidEntry& e : gids) valid += e.valid;
  if (max_entries < valid || (valid && !entries)) return -EINVAL;
  size_t n = 0;
  for (size_t i = 0; i < gids.size(); ++i) {
    if (!gids[i].valid) continue;
    auto* out = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
    FillGidEntry(gids[i], static_cast<uint32_t>(i), out);
    ++n;
  }
  return static_cast<ssize_t>(n);
}

int QueryGidType(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (!ValidContext(context) || !type || !ValidPort(port_num) ||
      index >= static_cast<unsigned>(limits::kGidTableLen)) {
    errno = EINVAL;
    return -1;
  }
  *type = 1;  // every GID of ours is RoCE v2 (sysfs encoding)
  return 0;
}

int QueryPkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (!ValidContext(context) || !pkey || !ValidPort(port_num)) return EINVAL;
  if (index < 0 || index >= limits::kPkeyTableLen) return EINVAL;
  *pkey = htobe16(limits::kDefaultPkey);
  return 0;
}

int GetPkeyIndex(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (!ValidContext(context) || !ValidPort(port_num)) {
    errno = EINVAL;
    return -1;
  }
  // Membership bit aside, the only P_Key is the default one.
  if ((be16toh(pkey) & 0x7fff) == (limits::kDefaultPkey & 0x7fff)) return 0;
  errno = ENOENT;
  return -1;
}

int GetAsyncEvent(ibv_context* context, ibv_async_event* event) {
  if (!ValidContext(context) || !event) {
    errno = EINVAL;
    return -1;
  }
  return Context::From(context)->async_events.Get(context->async_fd, event);
}

void AckAsyncEvent(ibv_async_event* event) {
  if (!event) return;
  // The element's members share a union; ObjectOf reads the one the type
  // names (a port event's port number is no pointer).
  void* object =
      event->event_type == IBV_EVENT_CQ_ERR ? static_cast<void*>(event->element.cq)
      : (event->event_type == IBV_EVENT_SRQ_ERR || event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
          ? static_cast<void*>(event->element.srq)
          : static_cast<void*>(event->element.qp);
  // Port and device events name no object: nothing waits for them.
  const EventObject o = ObjectOf(event->event_type, object);
  if (o.count && o.ctx) o.ctx->async_events.Ack(o.count);
}

int ForkInit() {
  return 0;
}

// softrdma moves data with memcpy and cross-memory attach, never DMA, so a
// fork() cannot break registered memory in the parent: fork support is not
// needed, which is what IBV_FORK_UNNEEDED says.
ibv_fork_status IsForkInitialized() {
  return IBV_FORK_UNNEEDED;
}

}  // namespace softrdma::verbs
