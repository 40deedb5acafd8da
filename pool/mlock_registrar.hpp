// The built-in registrar: pins pages with mlock. Transports add their own registrars
// (fi_mr_reg, ibv_reg_mr); this one makes pinning real on machines without a NIC.
#pragma once

#include "tether/pool.hpp"

namespace tether::pool {

class MlockRegistrar final : public Registrar {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "mlock"; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length,
                                                      Access access) override;
  void deregister(const Registration& registration) noexcept override;
};

// The process's one MlockRegistrar.
MlockRegistrar& mlock_registrar() noexcept;

}  // namespace tether::pool
