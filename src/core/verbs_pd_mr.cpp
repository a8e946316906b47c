// Protection domains and memory regions.
#include <cerrno>
#include <cstdint>
#include <memory>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/device.h"
#include "core/limits.h"
#include "core/objects.h"
#include "core/verbs.h"
#include "transport/engine.h"

namespace softrdma::verbs {

namespace {

std::atomic<uint32_t> g_next_handle{1};

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
  pd->pd.handle = g_next_handle.fetch_add(1);
  pd->id = engine->NewPdId();
  return &pd->pd;
}

int DeallocPd(ibv_pd* ibpd) {
  if (!ibpd) return EINVAL;
  Pd* pd = Pd::From(ibpd);
  if (pd->users.load() != 0) return EBUSY;
  delete pd;
  return 0;
}

ibv_mr* RegMr(ibv_pd* ibpd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (!ibpd) {
    errno = EINVAL;
    return nullptr;
  }
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (access & IBV_ACCESS_ON_DEMAND) {
    errno = EOPNOTSUPP;  // no on-demand paging (not advertised)
    return nullptr;
  }
  if ((access & ~kMrAccess) || length == 0 || length > limits::kMaxMrSize) {
    errno = EINVAL;
    return nullptr;
  }
  // Remote write or atomic access requires local write (IB spec; rdma-core
  // and the kernel enforce it the same way).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE)) {
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
  int rc = engine->mr_table().Add(pd->id, access, iova, length, reinterpret_cast<uint64_t>(addr),
                                  &mr->mr.lkey, &mr->mr.rkey);
  if (rc) {
    delete mr;
    errno = rc;
    return nullptr;
  }
  mr->mr.context = ibpd->context;
  mr->mr.pd = ibpd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = g_next_handle.fetch_add(1);
  mr->pd_id = pd->id;
  pd->users.fetch_add(1);
  return &mr->mr;
}

int DeregMr(ibv_mr* ibmr) {
  if (!ibmr) return EINVAL;
  Engine* engine = Engine::Get(nullptr);
  if (!engine) return EINVAL;
  Mr* mr = Mr::From(ibmr);
  engine->mr_table().Remove(ibmr->lkey);
  Pd::From(ibmr->pd)->users.fetch_sub(1);
  delete mr;
  return 0;
}

}  // namespace softrdma::verbs
