// RAII owner of one mapping of a POSIX shared-memory object (/dev/shm). Used
// for the per-process inbound rings and anything else processes on one host
// share. The mapping address differs in every process, so nothing stored in a
// region may be a pointer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "util/status.h"

namespace softrdma::shm {

class ShmRegion {
 public:
  ShmRegion() = default;
  ~ShmRegion();
  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  // Creates a new object (fails with EEXIST if `name` exists) of `bytes`
  // bytes, zero-filled, and maps it read-write. `name` is "/something" with no
  // further '/'. On failure nothing is left behind in /dev/shm.
  static Status Create(std::string_view name, size_t bytes, ShmRegion* out, mode_t mode = 0600);
  // Maps an existing object read-write, over its full current size.
  static Status Open(std::string_view name, ShmRegion* out);
  // Removes the name; existing mappings stay valid until unmapped.
  static Status Unlink(std::string_view name);

  bool valid() const { return data_ != nullptr; }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // Unmaps now (the destructor does the same).
  void Reset();

 private:
  // Maps `bytes` of the open object `fd` into *out.
  static Status Map(int fd, std::string_view name, size_t bytes, ShmRegion* out);

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace softrdma::shm
