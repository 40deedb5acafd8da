// libfabric's shm provider names each endpoint's region /dev/shm/<pid>:<n>:<n> and
// removes it only when the endpoint closes. A process killed (or ended with _exit) leaves
// it behind: 16 MiB each, and a later process given the same pid fails fi_enable (EBUSY).
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace tether::transport::ofi {

// Removes the regions named after `pid`; returns how many. Call it only for a pid whose
// process is gone (tether-run after reaping a rank), or for this process before its first
// endpoint.
std::size_t remove_shm_regions_of(pid_t pid) noexcept;

}  // namespace tether::transport::ofi
