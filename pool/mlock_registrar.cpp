#include "pool/mlock_registrar.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "pool/memlock.hpp"

namespace tether::pool {

// Raw system calls: sanitizer runtimes turn the libc mlock into a no-op.
Expected<Registration> MlockRegistrar::register_range(void* address, std::size_t length, Access) {
  if (::syscall(SYS_mlock, address, length) != 0)
    return tl::unexpected(pinning_error(errno, length, "the size of what is registered"));
  return Registration{address, length, 0, nullptr, nullptr};
}

void MlockRegistrar::deregister(const Registration& registration) noexcept {
  ::syscall(SYS_munlock, registration.address, registration.length);
}

MlockRegistrar& mlock_registrar() noexcept {
  static MlockRegistrar instance;
  return instance;
}

}  // namespace tether::pool
