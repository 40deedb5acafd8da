// Failure injection, for tests only: tcp-own's copy of a queued inject-size payload
// (TcpTransport::keep_unsent) fails as if memory had run out, so tests reach the paths
// that must never keep the caller's buffer (TcpTransport::drop_uncopied). Off unless a
// test arms it; per process.
#pragma once

#include <cstdint>

namespace tether::transport::tcp {

// After `successes` more copies succeed, the next `failures` copies fail.
void inject_copy_failures(std::uint32_t successes, std::uint32_t failures) noexcept;
// Whether the copy about to be made is to fail (counts it).
[[nodiscard]] bool copy_failure_injected() noexcept;

}  // namespace tether::transport::tcp
