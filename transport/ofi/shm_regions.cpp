#include "transport/ofi/shm_regions.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "runtime/base/log.hpp"

namespace tether::transport::ofi {

std::size_t remove_shm_regions_of(pid_t pid) noexcept {
  const std::string prefix = std::to_string(pid) + ":";
  DIR* directory = ::opendir("/dev/shm");
  if (directory == nullptr) return 0;
  std::size_t removed = 0;
  while (dirent* entry = ::readdir(directory)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (::unlinkat(::dirfd(directory), entry->d_name, 0) != 0) continue;
    log::info("transport", "removed /dev/shm/{}, a libfabric shm region left by process {}", entry->d_name, pid);
    ++removed;
  }
  ::closedir(directory);
  return removed;
}

}  // namespace tether::transport::ofi
