#include "pool/mlock_registrar.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "pool/memlock.hpp"

namespace tether::pool {
namespace {

// One line of /proc/self/maps ("start-end perms ..."): its mapping's part within
// [start, end) is unlocked. false once the mappings lie past `end` (they are in order).
bool unlock_within(std::string_view line, std::uintptr_t start, std::uintptr_t end) noexcept {
  std::uintptr_t from = 0;
  std::uintptr_t to = 0;
  auto dash = std::from_chars(line.data(), line.data() + line.size(), from, 16);
  if (dash.ec != std::errc{} || dash.ptr == line.data() + line.size() || *dash.ptr != '-') return true;
  if (std::from_chars(dash.ptr + 1, line.data() + line.size(), to, 16).ec != std::errc{}) return true;
  if (from >= end) return false;
  if (to > start) ::syscall(SYS_munlock, std::max(from, start), std::min(to, end) - std::max(from, start));
  return true;
}

// munlock stops at the first unmapped page of its range (ENOMEM) and unlocks nothing when
// the range starts in one: a registration part of which was unmapped since would leave
// the rest locked for good. So each mapping still within the range is unlocked on its
// own, read from /proc/self/maps (one read of the file, whatever the range's size).
void unlock_mapped_parts(std::uintptr_t start, std::uintptr_t end) noexcept {
  int maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return;
  char buffer[4096];
  std::size_t kept = 0;
  bool more = true;
  bool skipping = false;  // the rest of a line longer than the buffer (a long path name)
  for (ssize_t got; more && (got = ::read(maps, buffer + kept, sizeof buffer - kept)) > 0;) {
    std::size_t filled = kept + static_cast<std::size_t>(got);
    std::size_t line = 0;
    for (std::size_t i = 0; i < filled && more; ++i) {
      if (buffer[i] != '\n') continue;
      if (!skipping) more = unlock_within({buffer + line, i - line}, start, end);
      skipping = false;
      line = i + 1;
    }
    kept = filled - line;
    if (kept == sizeof buffer) {
      kept = 0;
      skipping = true;
    }
    std::memmove(buffer, buffer + filled - kept, kept);
  }
  ::close(maps);
}

}  // namespace

// Raw system calls: sanitizer runtimes turn the libc mlock into a no-op.
Expected<Registration> MlockRegistrar::register_range(void* address, std::size_t length, Access) {
  if (::syscall(SYS_mlock, address, length) != 0)
    return tl::unexpected(pinning_error(errno, length, "the size of what is registered"));
  return Registration{address, length, 0, nullptr, nullptr};
}

void MlockRegistrar::deregister(const Registration& registration) noexcept {
  if (::syscall(SYS_munlock, registration.address, registration.length) == 0 || errno != ENOMEM) return;
  auto start = reinterpret_cast<std::uintptr_t>(registration.address);
  unlock_mapped_parts(start, start + registration.length);
}

MlockRegistrar& mlock_registrar() noexcept {
  static MlockRegistrar instance;
  return instance;
}

}  // namespace tether::pool
