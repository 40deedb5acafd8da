#include "pool/memlock.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::pool {
namespace {

constexpr int kCapIpcLock = 14;
constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

// Reads a "Name:\tvalue" line of /proc/self/status.
bool read_status_field(const char* field, char* value, std::size_t value_size) {
  std::FILE* status = std::fopen("/proc/self/status", "re");
  if (status == nullptr) return false;
  char line[256];
  bool found = false;
  std::size_t field_length = std::strlen(field);
  while (!found && std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, field, field_length) != 0 || line[field_length] != ':') continue;
    std::snprintf(value, value_size, "%s", line + field_length + 1);
    found = true;
  }
  std::fclose(status);
  return found;
}

bool effective_capability(int capability) {
  char value[64];
  if (!read_status_field("CapEff", value, sizeof value)) return false;
  unsigned long long mask = std::strtoull(value, nullptr, 16);
  return (mask >> capability) & 1ULL;
}

std::uint64_t locked_bytes_now() {
  char value[64];
  if (!read_status_field("VmLck", value, sizeof value)) return 0;
  return std::strtoull(value, nullptr, 10) * 1024;  // reported in kB
}

}  // namespace

bool MemlockLimit::unlimited() const noexcept { return has_ipc_lock || soft_bytes == kUnlimited; }

std::uint64_t MemlockLimit::available() const noexcept {
  if (unlimited()) return kUnlimited;
  return soft_bytes > locked_bytes ? soft_bytes - locked_bytes : 0;
}

std::string MemlockLimit::describe() const {
  std::string limit = soft_bytes == kUnlimited
                          ? std::string("unlimited")
                          : fmt::format("{} (ulimit -l {})", config::format_size(soft_bytes), soft_bytes / 1024);
  return fmt::format("RLIMIT_MEMLOCK is {}{}, {} locked already", limit,
                     has_ipc_lock ? " but CAP_IPC_LOCK lifts it" : "",
                     config::format_size(locked_bytes));
}

MemlockLimit read_memlock_limit() noexcept {
  MemlockLimit limit;
  rlimit current{};
  if (::getrlimit(RLIMIT_MEMLOCK, &current) == 0)
    limit.soft_bytes = current.rlim_cur == RLIM_INFINITY ? kUnlimited : current.rlim_cur;
  limit.has_ipc_lock = effective_capability(kCapIpcLock);
  limit.locked_bytes = locked_bytes_now();
  return limit;
}

Error pinning_error(int sys_errno, std::size_t requested, std::string_view knob) {
  MemlockLimit limit = read_memlock_limit();
  std::string cause = fmt::format("pinning {} failed: {} ({}); {}", config::format_size(requested),
                                  std::strerror(sys_errno), sys_errno, limit.describe());
  bool memlock = sys_errno == ENOMEM || sys_errno == EPERM || sys_errno == EAGAIN;
  std::string remedy = fmt::format(
      "raise the limit (ulimit -l unlimited, or memlock in /etc/security/limits.conf) "
      "or lower {}",
      knob);
  return Error{memlock ? Errc::memlock_limit : Errc::registration_failed, sys_errno,
               std::move(cause), std::move(remedy)};
}

}  // namespace tether::pool
