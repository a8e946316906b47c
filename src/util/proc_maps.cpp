#include "util/proc_maps.h"

#include <cerrno>
#include <charconv>

#include <fcntl.h>
#include <unistd.h>

namespace softrdma {

namespace {

bool ParseHex(std::string_view& s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, 16);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

bool ParseDec(std::string_view& s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v, 10);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

bool Expect(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

void SkipSpaces(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
}

// "start-end perms offset dev inode   path"
bool ParseLine(std::string_view s, MapsEntry* e) {
  uint64_t dev_major = 0, dev_minor = 0;
  if (!ParseHex(s, &e->start) || !Expect(s, '-') || !ParseHex(s, &e->end) || !Expect(s, ' '))
    return false;
  if (s.size() < 5) return false;
  e->read = s[0] == 'r';
  e->write = s[1] == 'w';
  e->exec = s[2] == 'x';
  e->shared = s[3] == 's';
  s.remove_prefix(4);
  if (!Expect(s, ' ') || !ParseHex(s, &e->offset) || !Expect(s, ' ') || !ParseHex(s, &dev_major) ||
      !Expect(s, ':') || !ParseHex(s, &dev_minor) || !Expect(s, ' ') || !ParseDec(s, &e->inode))
    return false;
  SkipSpaces(s);
  e->path.assign(s);
  return e->start < e->end;
}

}  // namespace

std::vector<MapsEntry> ParseMaps(std::string_view text) {
  std::vector<MapsEntry> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    MapsEntry e;
    if (ParseLine(line, &e)) out.push_back(std::move(e));
  }
  return out;
}

std::vector<MapsEntry> ReadSelfMaps() {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return ParseMaps(text);
}

}  // namespace softrdma
