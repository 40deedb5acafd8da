// Memory monitors: what tells the registration cache that memory went away.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "pool/rcache/watch_counts.hpp"
#include "tether/error.hpp"

namespace tether::rcache {

enum class MonitorKind : std::uint8_t { interpose, uffd, none };

// Interposition: libtether's munmap/mremap/madvise/brk/sbrk report to the caches.
void interpose_enable(bool on) noexcept;
[[nodiscard]] bool interpose_enabled() noexcept;

// userfaultfd: a thread reads UFFD_EVENT_UNMAP/REMOVE/REMAP for every range registered
// with uffd_watch(). Started once per process.
[[nodiscard]] Expected<void> uffd_start();
// Adds [start, end) (page-aligned) to the watched ranges. One call per registered entry;
// if it returns true (counted: false only when memory ran out), one uffd_unwatch() of the
// same range when the entry is destroyed. Pages leave the userfaultfd when no entry of
// any cache covers them any more (watch_counts.hpp). The kernel refuses some memory
// (file-backed, for one): the interposition hooks still see its munmap.
bool uffd_watch(std::uintptr_t start, std::uintptr_t end) noexcept;
void uffd_unwatch(std::span<const WatchCounts::Range> ranges) noexcept;
// Held across fork() (monitor.cpp), so the child never inherits it taken.
void uffd_watches_lock_for_fork() noexcept;
void uffd_watches_unlock_after_fork() noexcept;
[[nodiscard]] bool uffd_running() noexcept;
// Waits while the reader is telling the caches about events it has read.
void uffd_wait_idle() noexcept;

// TETHER_MALLOC_KEEP: glibc never trims the heap nor serves blocks with mmap.
void malloc_keep_enable() noexcept;

// Unmapping events seen by the monitors since start (for tests and stats).
[[nodiscard]] std::uint64_t monitor_events() noexcept;

}  // namespace tether::rcache
