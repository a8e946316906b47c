#include "host/unusable_shm.h"

namespace softrdma {

std::string ShmPath(const std::string& shm_name) {
  return "/dev/shm" + shm_name;
}

std::string UnusableShm(const std::string& shm_name, const std::string& reason,
                        const std::string& fix) {
  return ShmPath(shm_name) + ": " + reason + "; " + fix;
}

}  // namespace softrdma
