// Protection domains and memory regions.
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/context_file.h"
#include "core/device.h"
#include "core/limits.h"
#include "core/objects.h"
#include "core/verbs.h"
#include "transport/engine.h"
#include "util/config.h"

namespace softrdma::verbs {

namespace {

// PD handles: the lowest free slot of the context files' PD tables (the
// kernel's handles are small reused numbers too); past those, numbers that
// cannot be imported.
class PdHandles {
 public:
  uint32_t Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (uint32_t h = 1; h < ContextFile::kPdSlots; ++h) {
      if (!used_[h]) {
        used_[h] = true;
        return h;
      }
    }
    return ContextFile::kPdSlots + overflow_++;
  }
  void Give(uint32_t h) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (h < ContextFile::kPdSlots) used_[h] = false;
  }

 private:
  std::mutex mutex_;
  std::vector<bool> used_ = std::vector<bool>(ContextFile::kPdSlots);
  uint32_t overflow_ = 0;
};

PdHandles& PdHandleAllocator() {
  static auto* handles = new PdHandles();  // never destroyed: used until exit
  return *handles;
}

ContextFile& FileOf(ibv_context* c) {
  return *Context::From(c)->file;
}

// What an importer of the MR needs (core/context_file.h).
void PublishMr(Engine& engine, const ibv_mr& mr, const Mr& m) {
  MrRecordView v{};
  v.pd_handle = mr.pd->handle;
  v.lkey = mr.lkey;
  v.rkey = mr.rkey;
  v.access = m.access;
  v.iova = m.iova;
  v.length = mr.length;
  v.host_addr = reinterpret_cast<uint64_t>(mr.addr);
  v.extent_fd = -1;
  if (const ExportedExtent* x = engine.exporter().Extent(m.extent)) {
    v.extent_fd = x->fd;
    v.extent_inode = x->inode;
    v.extent_base = x->base;
    v.extent_length = x->length;
  }
  FileOf(mr.context).PublishMr(mr.handle, v);
}

// Access bits an MR may carry. Bits in IBV_ACCESS_OPTIONAL_RANGE are hints a
// device may ignore (perftest and UCX pass RELAXED_ORDERING); they are dropped.
constexpr unsigned kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                               IBV_ACCESS_MW_BIND | IBV_ACCESS_HUGETLB;

// True if every page of [addr, addr+len) is mapped in this process.
bool RangeIsMapped(const void* addr, size_t len) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(addr) + len;
  if (end < reinterpret_cast<uintptr_t>(addr)) return false;  // wraps
  // mincore fails with ENOMEM if any page in the range is not mapped; probe
  // in chunks so that the residency vector stays small.
  constexpr size_t kChunkPages = 4096;
  unsigned char vec[kChunkPages];
  for (uintptr_t p = start; p < end; p += kChunkPages * page) {
    size_t bytes = std::min<uintptr_t>(end - p, kChunkPages * page);
    if (mincore(reinterpret_cast<void*>(p), bytes, vec) != 0) return false;
  }
  return true;
}

// The access rules of ibv_reg_mr (also those of ibv_rereg_mr's new
// access). Drops the optional bits in *access; returns 0 or the errno.
int CheckAccess(unsigned* access) {
  *access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (*access & IBV_ACCESS_ON_DEMAND) return EOPNOTSUPP;  // no on-demand paging (not advertised)
  if (*access & ~kMrAccess) return EINVAL;
  // Remote write or atomic access requires local write (IB spec; rdma-core
  // and the kernel enforce it the same way).
  if ((*access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(*access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  return 0;
}

// Makes the region's pages mappable by peers when allowed (0 = not).
uint32_t ExportRegion(Engine& engine, const void* addr, size_t length) {
  if (!GetConfig().map_mr) return 0;
  return engine.exporter().Export(reinterpret_cast<uint64_t>(addr), length);
}

}  // namespace

ibv_pd* AllocPd(ibv_context* context) {
  if (!context || context->device != Device::Get().verbs_device()) {
    errno = EINVAL;
    return nullptr;
  }
  Engine* engine = Engine::Get(nullptr);
  auto* pd = new (std::nothrow) Pd();
  if (!engine || !pd) {
    delete pd;
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = PdHandleAllocator().Take();
  pd->id = engine->NewPdId();
  FileOf(context).PublishPd(pd->pd.handle, pd->id);
  return &pd->pd;
}

int DeallocPd(ibv_pd* ibpd) {
  if (!ibpd) return EINVAL;
  Pd* pd = Pd::From(ibpd);
  if (pd->users.load() != 0) return EBUSY;
  if (pd->imported) {
    UnimportPd(ibpd);  // the exporter's PD is the exporter's to free
    return 0;
  }
  FileOf(ibpd->context).WithdrawPd(ibpd->handle);
  PdHandleAllocator().Give(ibpd->handle);
  delete pd;
  return 0;
}

ibv_mr* RegMr(ibv_pd* ibpd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (!ibpd) {
    errno = EINVAL;
    return nullptr;
  }
  if (int rc = CheckAccess(&access)) {
    errno = rc;
    return nullptr;
  }
  if (length == 0 || length > limits::kMaxMrSize) {
    errno = EINVAL;
    return nullptr;
  }
  if (!addr || !RangeIsMapped(addr, length)) {
    errno = EFAULT;
    return nullptr;
  }
  Engine* engine = Engine::Get(nullptr);
  auto* mr = new (std::nothrow) Mr();
  if (!engine || !mr) {
    delete mr;
    errno = ENOMEM;
    return nullptr;
  }
  Pd* pd = Pd::From(ibpd);
  mr->extent = ExportRegion(*engine, addr, length);
  int rc = engine->mr_table().Add(pd->id, access, iova, length, reinterpret_cast<uint64_t>(addr),
                                  &mr->mr.lkey, &mr->mr.rkey, mr->extent);
  if (rc) {
    engine->exporter().Release(mr->extent);
    delete mr;
    errno = rc;
    return nullptr;
  }
  mr->mr.context = ibpd->context;
  mr->mr.pd = ibpd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = mr->mr.lkey >> 8;  // its table index: unique among live MRs
  mr->pd_id = pd->id;
  mr->access = access;
  mr->iova = iova;
  pd->users.fetch_add(1);
  PublishMr(*engine, mr->mr, *mr);
  return &mr->mr;
}

int DeregMr(ibv_mr* ibmr) {
  if (!ibmr) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EINVAL;
  Mr* mr = Mr::From(ibmr);
  if (mr->origin != Mr::Origin::kOwn) {
    UnimportMr(ibmr);  // the exporter's registration is the exporter's to end
    return 0;
  }
  // Windows bound to the MR point into its memory: unbind them first.
  if (int rc = engine->mr_table().Remove(ibmr->lkey)) return rc;
  FileOf(ibmr->context).WithdrawMr(ibmr->handle);
  engine->exporter().Release(mr->extent);  // after Remove: no peer is copying any more
  Pd::From(ibmr->pd)->users.fetch_sub(1);
  delete mr;
  return 0;
}

// Input errors that rdma-core's own wrapper catches before the provider
// return IBV_REREG_MR_ERR_INPUT; everything refused past that point returns
// IBV_REREG_MR_ERR_CMD with errno, the MR unchanged (ibv_rereg_mr(3)).
// The lkey and rkey stay (rxe and mlx5 keep them: "resources are reused"
// in ibv_rereg_mr(3)), so a peer's rkey now opens the region with its new
// PD, access and memory, and nothing of the old one.
int ReregMr(ibv_mr* ibmr, int flags, ibv_pd* ibpd, void* addr, size_t length, int access_in) {
  auto input_error = [] {
    errno = EINVAL;
    return static_cast<int>(IBV_REREG_MR_ERR_INPUT);
  };
  if (!ibmr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)) return input_error();
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) return input_error();
  if (access_in && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) return input_error();
  auto cmd_error = [](int e) {
    errno = e;
    return static_cast<int>(IBV_REREG_MR_ERR_CMD);
  };
  if (!flags) return cmd_error(EINVAL);  // nothing to change: the kernel says EINVAL
  Mr* mr = Mr::From(ibmr);
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return cmd_error(EIO);
  // An imported MR is the exporter's registration: only it changes it.
  if (mr->origin != Mr::Origin::kOwn) return cmd_error(EOPNOTSUPP);

  ibv_pd* new_pd = ibmr->pd;
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    if (!ibpd || ibpd->context != ibmr->context) return cmd_error(EINVAL);
    new_pd = ibpd;
  }
  unsigned access = mr->access;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    access = static_cast<unsigned>(access_in);
    if (int rc = CheckAccess(&access)) return cmd_error(rc);
  }
  void* new_addr = ibmr->addr;
  size_t new_length = ibmr->length;
  uint64_t iova = mr->iova;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    if (length > limits::kMaxMrSize) return cmd_error(EINVAL);
    if (!RangeIsMapped(addr, length)) return cmd_error(EFAULT);
    new_addr = addr;
    new_length = length;
    iova = reinterpret_cast<uintptr_t>(addr);  // as ibv_reg_mr
  }

  // A new translation is exported before the region switches to it; the
  // old export goes once no peer can reach it any more.
  Pd* pd = Pd::From(new_pd);
  const bool moved = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
  const uint32_t extent = moved ? ExportRegion(*engine, new_addr, new_length) : mr->extent;
  if (int rc = engine->mr_table().Reregister(ibmr->lkey, pd->id, access, iova, new_length,
                                             reinterpret_cast<uint64_t>(new_addr), extent)) {
    if (moved) engine->exporter().Release(extent);
    return cmd_error(rc);  // EBUSY: windows are bound to it (see DeregMr)
  }
  if (moved) engine->exporter().Release(mr->extent);
  mr->extent = extent;
  if (new_pd != ibmr->pd) {
    pd->users.fetch_add(1);
    Pd::From(ibmr->pd)->users.fetch_sub(1);
  }
  ibmr->pd = new_pd;
  ibmr->addr = new_addr;
  ibmr->length = new_length;
  mr->pd_id = pd->id;
  mr->access = access;
  mr->iova = iova;
  PublishMr(*engine, *ibmr, *mr);
  return 0;
}

}  // namespace softrdma::verbs
