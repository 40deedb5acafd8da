#include "pool/mlock_registrar.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "pool/memlock.hpp"

namespace tether::pool {
namespace {

// munlock stops at the first unmapped page of its range (ENOMEM) and unlocks nothing when
// the range starts in one: a registration part of which was unmapped since would leave
// the rest locked for good. So the halves are tried until every mapped page is unlocked.
void unlock_around_holes(std::uintptr_t start, std::uintptr_t end, std::uintptr_t page) noexcept {
  if (::syscall(SYS_munlock, start, end - start) == 0 || errno != ENOMEM || end - start <= page) return;
  std::uintptr_t middle = start + ((end - start) / 2 & ~(page - 1));
  unlock_around_holes(start, middle, page);
  unlock_around_holes(middle, end, page);
}

}  // namespace

// Raw system calls: sanitizer runtimes turn the libc mlock into a no-op.
Expected<Registration> MlockRegistrar::register_range(void* address, std::size_t length, Access) {
  if (::syscall(SYS_mlock, address, length) != 0)
    return tl::unexpected(pinning_error(errno, length, "the size of what is registered"));
  return Registration{address, length, 0, nullptr, nullptr};
}

void MlockRegistrar::deregister(const Registration& registration) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto address = reinterpret_cast<std::uintptr_t>(registration.address);
  unlock_around_holes(address & ~(page - 1), (address + registration.length + page - 1) & ~(page - 1), page);
}

MlockRegistrar& mlock_registrar() noexcept {
  static MlockRegistrar instance;
  return instance;
}

}  // namespace tether::pool
