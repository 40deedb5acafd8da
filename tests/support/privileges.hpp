// Test helpers for running without CAP_IPC_LOCK and under a small RLIMIT_MEMLOCK (used in
// forked children only: both changes are irreversible for the process).
#pragma once

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace tether::testing {

inline bool drop_ipc_lock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[0].effective &= ~(1U << CAP_IPC_LOCK);
  data[0].permitted &= ~(1U << CAP_IPC_LOCK);
  return ::syscall(SYS_capset, &header, data) == 0;
}

inline bool limit_memlock(std::size_t bytes) {
  rlimit limit{bytes, bytes};
  return ::setrlimit(RLIMIT_MEMLOCK, &limit) == 0;
}

}  // namespace tether::testing
