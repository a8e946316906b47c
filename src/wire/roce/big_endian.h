// Big-endian (network order) loads and stores of 1..8 byte fields, for the
// RoCEv2 headers (roce-wire.md: every multi-byte header field is big-endian;
// only the ICRC is not, see icrc.h). Callers pass spans whose size they have
// already checked, so these never read or write outside them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softrdma::roce {

constexpr uint64_t LoadBe(std::span<const uint8_t> bytes, size_t offset, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) value = (value << 8) | bytes[offset + i];
  return value;
}

constexpr void StoreBe(std::span<uint8_t> bytes, size_t offset, size_t n, uint64_t value) {
  for (size_t i = n; i-- > 0;) {
    bytes[offset + i] = uint8_t(value);
    value >>= 8;
  }
}

}  // namespace softrdma::roce
