#include "cli/mount_stage.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

namespace softrdma::cli {

namespace {

bool Failed(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

bool Bind(const std::string& from, const std::string& to, std::string* error) {
  // MS_REC even for single files: in a user namespace the kernel refuses a
  // non-recursive bind that would uncover what a locked mount hides.
  if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return Failed(error, "binding " + from + " onto " + to);
  }
  return true;
}

bool CreateEmptyFile(const std::string& path, std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Failed(error, "creating " + path);
  close(fd);
  return true;
}

bool MakeDirectory(const std::string& path, mode_t mode, std::string* error) {
  if (mkdir(path.c_str(), mode) != 0 || chmod(path.c_str(), mode) != 0) {
    return Failed(error, "creating " + path);
  }
  return true;
}

// Re-creates /dev/<name> at <dev_dir>/<name> as a mount of the original.
bool MirrorDevEntry(const std::string& dev_dir, const char* name, std::string* error) {
  const std::string from = std::string("/dev/") + name;
  const std::string to = dev_dir + "/" + name;
  struct stat st {};
  if (lstat(from.c_str(), &st) != 0) return Failed(error, "lstat " + from);
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    const ssize_t n = readlink(from.c_str(), target, sizeof target - 1);
    if (n < 0) return Failed(error, "readlink " + from);
    target[n] = '\0';
    if (symlink(target, to.c_str()) != 0) return Failed(error, "creating symlink " + to);
    return true;
  }
  if (S_ISDIR(st.st_mode)) {
    if (!MakeDirectory(to, st.st_mode & 07777, error)) return false;
  } else if (!CreateEmptyFile(to, error)) {
    return false;
  }
  return Bind(from, to, error);
}

}  // namespace

bool MountStage(std::string* path, std::string* error) {
  static const char* const kCandidates[] = {"/tmp", "/mnt", "/run", "/var/tmp"};
  for (const char* candidate : kCandidates) {
    struct stat st {};
    if (lstat(candidate, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (mount("softrdma", candidate, "tmpfs", MS_NOSUID, "mode=0700,size=16m") != 0) {
      return Failed(error, std::string("mounting a tmpfs on ") + candidate);
    }
    *path = candidate;
    return true;
  }
  *error = "no directory to assemble the mounts on (none of /tmp, /mnt, /run, /var/tmp exists)";
  return false;
}

bool UnmountStage(const std::string& path, std::string* error) {
  if (umount2(path.c_str(), MNT_DETACH) != 0)
    return Failed(error, "unmounting the tmpfs on " + path);
  return true;
}

bool BuildDevTree(const std::string& dev_dir, const std::vector<std::string>& rdma_nodes,
                  std::string* error) {
  if (!MakeDirectory(dev_dir, 0755, error)) return false;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/dev"), closedir);
  if (!dir) return Failed(error, "opening /dev");
  errno = 0;
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name == "infiniband") continue;
    if (!MirrorDevEntry(dev_dir, entry->d_name, error)) return false;
    errno = 0;
  }
  if (errno != 0) return Failed(error, "reading /dev");

  const std::string infiniband = dev_dir + "/infiniband";
  if (!MakeDirectory(infiniband, 0755, error)) return false;
  std::vector<std::string> nodes = rdma_nodes;
  nodes.push_back("rdma_cm");
  for (const std::string& node : nodes) {
    const std::string path = infiniband + "/" + node;
    if (!CreateEmptyFile(path, error) || !Bind("/dev/null", path, error)) return false;
  }
  return true;
}

bool ReplaceDev(const std::string& dev_dir, std::string* error) {
  return Bind(dev_dir, "/dev", error);
}

bool OverlaySysClass(const std::string& class_dir, std::string* error) {
  const std::string options = "lowerdir=" + class_dir + ":/sys/class";
  if (mount("overlay", "/sys/class", "overlay", MS_RDONLY, options.c_str()) == 0) return true;
  return Failed(error, "mounting an overlay on /sys/class (" + options + ")");
}

}  // namespace softrdma::cli
