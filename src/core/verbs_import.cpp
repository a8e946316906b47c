// ibv_import_pd / ibv_import_mr and their unimports: another context's PDs
// and MRs, found by handle in the file behind its cmd_fd
// (core/context_file.h). In the exporting process an import is an alias of
// the exporter's object (same PD id, same table entry and keys). In another
// process the PD gets an id of this process and an MR becomes a mirror: the
// exporter's pages (its exported extent) mapped here and registered in this
// process's table with the same access, iova and length, and keys of this
// table. docs/design.md "Sharing a PD and its MRs" says why.
#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context_file.h"
#include "core/device.h"
#include "core/objects.h"
#include "core/verbs.h"
#include "transport/engine.h"

namespace softrdma::verbs {

namespace {

bool ValidContext(ibv_context* c) {
  return c && c->device == Device::Get().verbs_device();
}

// One PD id of this process per exported PD (the exporter's file and PD id),
// so that importing the same PD twice gives one PD, as the kernel's shared
// object: an MR imported under either works with QPs of both.
uint32_t LocalIdOfExportedPd(Engine& engine, uint64_t file_inode, uint32_t exporter_pd_id) {
  static std::mutex mutex;
  static auto* ids = new std::map<std::pair<uint64_t, uint32_t>, uint32_t>();  // until exit
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = ids->try_emplace({file_inode, exporter_pd_id}, 0);
  if (added) it->second = engine.NewPdId();
  return it->second;
}

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Maps the pages of another process's MR here. Returns the address of its
// first byte and the mapping, or an errno: EOPNOTSUPP when its pages are not
// in an exported extent (SOFTRDMA_MAP_MR=0, memory that could not be moved,
// a region that is not made of whole pages), the errno of opening the
// exporter's memfd (ENOENT: the exporter is gone; EACCES: not allowed),
// EINVAL if the extent changed under us (the MR went meanwhile).
int MapExportedPages(pid_t owner, const MrRecordView& v, uint64_t* host, void** map,
                     size_t* bytes) {
  if (v.extent_fd < 0 || v.host_addr < v.extent_base || v.length > v.extent_length ||
      v.host_addr - v.extent_base > v.extent_length - v.length)
    return EOPNOTSUPP;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(owner), v.extent_fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_ino != v.extent_inode ||
      static_cast<uint64_t>(st.st_size) < v.extent_length) {
    close(fd);
    return EINVAL;
  }
  const uint64_t first = v.host_addr & ~(PageSize() - 1);
  const uint64_t end = (v.host_addr + v.length + PageSize() - 1) & ~(PageSize() - 1);
  void* p = mmap(nullptr, end - first, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(first - v.extent_base));
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return e;
  *host = reinterpret_cast<uint64_t>(p) + (v.host_addr - first);
  *map = p;
  *bytes = end - first;
  return 0;
}

}  // namespace

ibv_pd* ImportPd(ibv_context* context, uint32_t pd_handle) {
  Engine* engine = Engine::Get(nullptr);
  if (!ValidContext(context) || !engine) {
    errno = EINVAL;
    return nullptr;
  }
  ContextFile& file = *Context::From(context)->file;
  uint32_t exporter_pd_id = 0;
  if (!file.ReadPd(pd_handle, &exporter_pd_id)) {
    errno = EINVAL;  // no such PD (the kernel's answer to a bad handle)
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd();
  if (!pd) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = pd_handle;
  pd->imported = true;
  pd->id = file.OwnedHere() ? exporter_pd_id
                            : LocalIdOfExportedPd(*engine, file.inode(), exporter_pd_id);
  return &pd->pd;
}

void UnimportPd(ibv_pd* ibpd) {
  // A PD this process allocated is freed by ibv_dealloc_pd only.
  if (!ibpd || !Pd::From(ibpd)->imported) return;
  delete Pd::From(ibpd);
}

ibv_mr* ImportMr(ibv_pd* ibpd, uint32_t mr_handle) {
  Engine* engine = Engine::Get(nullptr);
  if (!ibpd || !ValidContext(ibpd->context) || !engine) {
    errno = EINVAL;
    return nullptr;
  }
  ContextFile& file = *Context::From(ibpd->context)->file;
  MrRecordView v{};
  // The MR must exist and belong to this PD (the kernel checks both).
  if (!file.ReadMr(mr_handle, &v) || v.pd_handle != ibpd->handle) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new (std::nothrow) Mr();
  if (!mr) {
    errno = ENOMEM;
    return nullptr;
  }
  Pd* pd = Pd::From(ibpd);
  if (file.OwnedHere()) {
    mr->origin = Mr::Origin::kAlias;
    mr->mr.lkey = v.lkey;
    mr->mr.rkey = v.rkey;
  } else {
    uint64_t host = 0;
    if (int rc = MapExportedPages(file.owner_pid(), v, &host, &mr->mirror_map, &mr->mirror_bytes)) {
      delete mr;
      errno = rc;
      return nullptr;
    }
    if (int rc = engine->mr_table().Add(pd->id, v.access, v.iova, v.length, host, &mr->mr.lkey,
                                        &mr->mr.rkey)) {
      munmap(mr->mirror_map, mr->mirror_bytes);
      delete mr;
      errno = rc;
      return nullptr;
    }
    mr->origin = Mr::Origin::kMirror;
  }
  mr->mr.context = ibpd->context;
  mr->mr.pd = ibpd;
  // As rdma-core's: the kernel does not say where the memory is mapped in
  // the exporter, so an imported MR has no address; its iova is the
  // exporter's (the addresses its keys take).
  mr->mr.addr = nullptr;
  mr->mr.length = v.length;
  mr->mr.handle = mr_handle;
  mr->pd_id = pd->id;
  mr->access = v.access;
  mr->iova = v.iova;
  pd->users.fetch_add(1);
  return &mr->mr;
}

void UnimportMr(ibv_mr* ibmr) {
  if (!ibmr) return;
  Mr* mr = Mr::From(ibmr);
  if (mr->origin == Mr::Origin::kOwn) return;  // freed by ibv_dereg_mr only
  if (mr->origin == Mr::Origin::kMirror) {
    Engine* engine = Engine::Get(nullptr);
    // Waits for accesses in flight before the pages go. EBUSY (windows are
    // bound to it): the mirror stays, since they point into its pages.
    if (!engine || engine->mr_table().Remove(ibmr->lkey) != 0) return;
    munmap(mr->mirror_map, mr->mirror_bytes);
  }
  Pd::From(ibmr->pd)->users.fetch_sub(1);
  delete mr;
}

}  // namespace softrdma::verbs
