// Test-only failure injection for tcp-own's copies (copy_failure_injection.hpp).
#include "transport/tcp/copy_failure_injection.hpp"

#include "transport/injected_failures.hpp"

namespace tether::transport::tcp {
namespace {

InjectedFailures copy_failures;

}  // namespace

void inject_copy_failures(std::uint32_t successes, std::uint32_t failures) noexcept {
  copy_failures.arm(successes, failures);
}

bool take_injected_copy_failure() noexcept { return copy_failures.take(); }

std::uint32_t injected_copy_failures_left() noexcept { return copy_failures.left(); }

}  // namespace tether::transport::tcp
