// Big-endian (network order) loads and stores of 1..8 byte fields: the wire
// formats (CM MADs, RoCEv2 headers; only the RoCEv2 ICRC is little-endian)
// are big-endian. Callers pass spans whose size they have already checked,
// so these never read or write outside them. Usable in constant expressions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softrdma {

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

}  // namespace softrdma
