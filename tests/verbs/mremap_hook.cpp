// The process-wide mremap interposer of mremap_hook.h. Defined in the test
// executable, it takes precedence over libc's for every shared library of
// the process, exactly as a memory hook installed by a middleware does.
#include "mremap_hook.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>

namespace softrdma::test {
namespace {

std::atomic<bool> g_armed{false};
std::atomic<uint32_t> g_calls{0};

}  // namespace

void ArmFourArgumentMremapHook(bool armed) {
  g_calls.store(0);
  g_armed.store(armed);
}

uint32_t FourArgumentMremapHookCalls() {
  return g_calls.load();
}

}  // namespace softrdma::test

extern "C" void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...) {
  void* new_address = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void*);
    va_end(ap);
  }
  if (softrdma::test::g_armed.load()) {
    softrdma::test::g_calls.fetch_add(1);
    // The target address is lost on the way: the kernel refuses the move
    // (or, with an unlucky stray value, moves the pages elsewhere).
    if (flags & MREMAP_FIXED) {
      errno = EINVAL;
      return MAP_FAILED;
    }
  }
  long rc = syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
  return rc == -1 ? MAP_FAILED : reinterpret_cast<void*>(rc);
}
