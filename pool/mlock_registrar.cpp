#include "pool/mlock_registrar.hpp"

#include <sys/mman.h>

#include <cerrno>

#include "pool/memlock.hpp"

namespace tether::pool {

Expected<Registration> MlockRegistrar::register_range(void* address, std::size_t length, Access) {
  if (::mlock(address, length) != 0)
    return tl::unexpected(pinning_error(errno, length, "the size of what is registered"));
  return Registration{address, length, 0, nullptr, nullptr};
}

void MlockRegistrar::deregister(const Registration& registration) noexcept {
  ::munlock(registration.address, registration.length);
}

MlockRegistrar& mlock_registrar() noexcept {
  static MlockRegistrar instance;
  return instance;
}

}  // namespace tether::pool
