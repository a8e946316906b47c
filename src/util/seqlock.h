// Field accesses of the seqlocks that publish entries in shared memory (MR
// table, published QP attributes). No fences (ThreadSanitizer cannot model
// them): the writer marks the entry odd, stores each field with release,
// then marks it even with release; a reader loads the sequence and every
// field with acquire, then re-reads the sequence. A field value from a newer
// write synchronises with its release store, which comes after that write's
// odd mark, so the re-read sees the mark (or a later one) and retries.
#pragma once

namespace softrdma {

template <typename T>
inline void SeqlockStore(T* field, T value) {
  __atomic_store_n(field, value, __ATOMIC_RELEASE);
}

template <typename T>
inline T SeqlockLoad(const T* field) {
  return __atomic_load_n(field, __ATOMIC_ACQUIRE);
}

}  // namespace softrdma
