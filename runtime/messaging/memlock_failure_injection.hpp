// Fault injection (TETHER_INJECT_MEMLOCK_FAILURE): a registrar that refuses every range as
// a real one refuses at the locked-memory limit, so multi-process tests can reach the
// runtime's handling of that error on transports that pin nothing (tcp, shm).
#pragma once

#include <fmt/format.h>

#include "tether/pool.hpp"

namespace tether::messaging {

class MemlockFailureInjectingRegistrar final : public Registrar {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "memlock-failure-injection"; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length, Access) override {
    return make_error(Errc::memlock_limit,
                      fmt::format("registering {} bytes at {} failed: the locked-memory limit is reached "
                                  "(injected by TETHER_INJECT_MEMLOCK_FAILURE)",
                                  length, address),
                      "unset TETHER_INJECT_MEMLOCK_FAILURE; at a real limit, raise ulimit -l or receive into "
                      "pool memory (tether::pinned_alloc)");
  }
  void deregister(const Registration&) noexcept override {}  // nothing was registered
};

}  // namespace tether::messaging
