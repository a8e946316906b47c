#include "cm/remote_peer.h"

#include <cstdio>

namespace softrdma::cm {
namespace {

constexpr size_t kPrefixLength = 5;  // "roce:"
constexpr size_t kGidHexLength = 32;

std::string Hex(const Gid& gid) {
  char buf[kGidHexLength + 1];
  for (size_t i = 0; i < gid.size(); ++i) std::snprintf(buf + 2 * i, 3, "%02x", gid[i]);
  return std::string(buf, kGidHexLength);
}

int Nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool FromHex(const std::string& text, size_t offset, Gid* gid) {
  for (size_t i = 0; i < gid->size(); ++i) {
    int high = Nibble(text[offset + 2 * i]);
    int low = Nibble(text[offset + 2 * i + 1]);
    if (high < 0 || low < 0) return false;
    (*gid)[i] = uint8_t(high << 4 | low);
  }
  return true;
}

}  // namespace

std::string RemotePeerName(const Gid& local_gid, const Gid& remote_gid) {
  return "roce:" + Hex(local_gid) + ":" + Hex(remote_gid);
}

bool ParseRemotePeerName(const std::string& name, Gid* local_gid, Gid* remote_gid) {
  constexpr size_t kSeparator = kPrefixLength + kGidHexLength;
  if (!IsRemotePeerName(name) || name.size() != kSeparator + 1 + kGidHexLength ||
      name[kSeparator] != ':') {
    return false;
  }
  return FromHex(name, kPrefixLength, local_gid) && FromHex(name, kSeparator + 1, remote_gid);
}

}  // namespace softrdma::cm
