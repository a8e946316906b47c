// The file behind a context's cmd_fd. The kernel's cmd_fd names the
// uverbs file that owns the context's objects, and ibv_import_device /
// ibv_import_pd / ibv_import_mr find them through it by handle. softrdma has
// no kernel object to name, so cmd_fd is a memfd that the context publishes
// its PDs and MRs into (by handle), with the owner's pid so that an importer
// in another process can reach the registered memory (docs/design.md
// "Sharing a PD and its MRs"). Another process receives it as any
// descriptor: inherited, or passed over a Unix socket (SCM_RIGHTS).
//
// Only the process that created the context writes the file; importers map
// it read-only. Each record is a seqlock (util/seqlock.h): odd `seq` while
// the owner changes it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <sys/types.h>

namespace softrdma {

struct ContextFileHeader {
  uint64_t magic;
  uint32_t version;
  int32_t pid;  // the process that created the context (and its objects)
};

struct SharedPdRecord {
  std::atomic<uint32_t> seq;
  uint32_t live;   // 1 = a PD with this handle exists
  uint32_t pd_id;  // the owner's PD id (what its MR entries record)
  uint32_t pad;
};

// What an importer needs of an MR: its keys and range, and where its pages
// are (the owner's exported extent: core/exported_extent.h).
struct SharedMrRecord {
  std::atomic<uint32_t> seq;
  uint32_t live;
  uint32_t pd_handle;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t access;
  uint64_t iova;
  uint64_t length;
  uint64_t host_addr;  // in the owner's address space
  // The extent holding the region's whole pages; extent_fd < 0 = none (the
  // region cannot be reached from another process).
  int32_t extent_fd;
  uint32_t pad;
  uint64_t extent_inode;
  uint64_t extent_base;
  uint64_t extent_length;
};

// A consistent copy of an MR record.
struct MrRecordView {
  uint32_t pd_handle, lkey, rkey, access;
  uint64_t iova, length, host_addr;
  int32_t extent_fd;
  uint64_t extent_inode, extent_base, extent_length;
};

class ContextFile {
 public:
  // PD handles are slot numbers below kPdSlots; MR handles are the MR's
  // table index (below MrTable::kCapacity), unique among live MRs.
  static constexpr uint32_t kPdSlots = 4096;
  static constexpr uint32_t kMrSlots = 1u << 16;

  ContextFile() = default;
  ~ContextFile();
  ContextFile(const ContextFile&) = delete;
  ContextFile& operator=(const ContextFile&) = delete;

  // A new, empty file owned by this process. Returns the descriptor (the
  // context's cmd_fd), or -1 with errno.
  int Create();
  // Maps the file behind `fd` (another context's cmd_fd). 0, EINVAL if it
  // is not a softrdma context file, or the errno of fstat/mmap (EBADF).
  int Attach(int fd);

  // True if this process created the file: only the owner publishes, and
  // objects it names live in this process.
  bool OwnedHere() const;
  pid_t owner_pid() const { return header_ ? header_->pid : 0; }
  // The memfd's inode: names the file (and so the exporting context) for
  // as long as any descriptor keeps it open.
  uint64_t inode() const { return inode_; }

  // Owner side: publish and withdraw objects by handle (out-of-range
  // handles are not published: they cannot be imported).
  void PublishPd(uint32_t handle, uint32_t pd_id);
  void WithdrawPd(uint32_t handle);
  void PublishMr(uint32_t handle, const MrRecordView& mr);
  void WithdrawMr(uint32_t handle);

  // Importer side: false if no such object is published.
  bool ReadPd(uint32_t handle, uint32_t* pd_id) const;
  bool ReadMr(uint32_t handle, MrRecordView* out) const;

 private:
  static size_t Bytes();
  void* base_ = nullptr;
  ContextFileHeader* header_ = nullptr;
  SharedPdRecord* pds_ = nullptr;
  SharedMrRecord* mrs_ = nullptr;
  uint64_t inode_ = 0;
};

}  // namespace softrdma
