// A stand-in for the memory hooks of communication libraries (UCX's UCM):
// they interpose mremap in every loaded library, libibverbs included. The
// one in tests/verbs/mremap_hook.cpp forwards every call faithfully to the
// kernel until armed; armed, it behaves like a hook that forwards only the
// first four arguments, so that an MREMAP_FIXED move loses its target
// address and fails.
#pragma once

#include <cstdint>

namespace softrdma::test {

// Arms (true) or disarms the hook and resets its call count.
void ArmFourArgumentMremapHook(bool armed);
// Calls that reached the hook while it was armed.
uint32_t FourArgumentMremapHookCalls();

}  // namespace softrdma::test
