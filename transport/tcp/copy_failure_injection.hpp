// Failure injection, for tests only: tcp-own's copy of a queued inject-size payload
// (TcpTransport::keep_unsent) fails as if memory had run out, so tests reach the paths
// that must never keep the caller's buffer (TcpTransport::drop_uncopied). Off unless a
// test arms it; per process.
#pragma once

#include <cstdint>

namespace tether::transport::tcp {

// After `successes` more copies succeed, the next `failures` copies fail; (0, 0) disarms.
void inject_copy_failures(std::uint32_t successes, std::uint32_t failures) noexcept;
// Whether the copy about to be made is to fail; counts it.
[[nodiscard]] bool take_injected_copy_failure() noexcept;
// Injected failures not yet taken.
[[nodiscard]] std::uint32_t injected_copy_failures_left() noexcept;

}  // namespace tether::transport::tcp
