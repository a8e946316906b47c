// XRC domains (ibv_open_xrcd / ibv_close_xrcd). A domain is what XRC target
// QPs and XRC SRQs must share for a message to land: the responder checks
// that the SRQ a sender names belongs to the target QP's domain.
//
// Identity: a domain opened with a file is that file's inode (st_dev,
// st_ino), so two processes opening the same file get the same domain with
// nothing to coordinate. fd -1 is a private domain, unique to its handle.
//
// Existence (O_CREAT / O_EXCL of ibv_open_xrcd(3)) is host-wide: every
// opener holds an open-file-description read lock on one byte of the file,
// far beyond any real data. "The domain exists" = someone holds that lock.
// The kernel drops the lock when the holder closes it or dies (SIGKILL
// included), so no table in shared memory can go stale.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include <infiniband/verbs.h>

namespace softrdma {

struct Xrcd {
  ibv_xrcd xrcd;  // first: the application's pointer converts back with a cast
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t private_id = 0;  // non-zero for an fd -1 domain
  // Non-zero; equal for two handles of this process exactly when they are
  // of the same domain, and for a file domain the same in every process
  // (a hash of dev/ino: see xrcd.cpp). Published with XRC target QPs and
  // SRQs, so that an initiator can check that an SRQ is in its target QP's
  // domain and ibv_open_qp that another process's target is in ours.
  uint32_t token = 0;
  int lock_fd = -1;           // our own open file description holding the lock
  std::atomic<int> users{0};  // XRC SRQs and target QPs: close fails with EBUSY

  static Xrcd* From(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x); }
  // Same domain: same file, or the very same private handle.
  bool SameDomain(const Xrcd& o) const {
    return private_id ? private_id == o.private_id
                      : (!o.private_id && dev == o.dev && ino == o.ino);
  }
};

}  // namespace softrdma
