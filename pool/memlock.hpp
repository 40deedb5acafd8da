// How much this process may pin, and errors that say so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tether/error.hpp"

namespace tether::pool {

struct MemlockLimit {
  std::uint64_t soft_bytes = 0;  // RLIMIT_MEMLOCK soft limit (UINT64_MAX: unlimited)
  bool has_ipc_lock = false;     // CAP_IPC_LOCK in the effective set: the limit does not apply
  std::uint64_t locked_bytes = 0;  // VmLck: what this process has pinned already

  [[nodiscard]] bool unlimited() const noexcept;
  // Bytes that may still be pinned (UINT64_MAX when unlimited).
  [[nodiscard]] std::uint64_t available() const noexcept;
  // "RLIMIT_MEMLOCK is 8M (ulimit -l 8192), 0 bytes locked already"
  [[nodiscard]] std::string describe() const;
};

[[nodiscard]] MemlockLimit read_memlock_limit() noexcept;

// The error for pinning `requested` bytes that failed with `sys_errno` (ENOMEM, EPERM,
// EAGAIN): names the limit, the size and `knob`, the option that sized the request.
[[nodiscard]] Error pinning_error(int sys_errno, std::size_t requested, std::string_view knob);

}  // namespace tether::pool
