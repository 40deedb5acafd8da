// Test-only failure injection for tcp-own's copies (copy_failure_injection.hpp).
#include "transport/tcp/copy_failure_injection.hpp"

#include <atomic>

namespace tether::transport::tcp {
namespace {

std::atomic<std::uint32_t> successes_left{0};
std::atomic<std::uint32_t> failures_left{0};

// Takes one from `counter` unless it is 0; whether it did.
bool take_one(std::atomic<std::uint32_t>& counter) noexcept {
  std::uint32_t seen = counter.load(std::memory_order_relaxed);
  while (seen > 0 && !counter.compare_exchange_weak(seen, seen - 1, std::memory_order_relaxed)) {
  }
  return seen > 0;
}

}  // namespace

void inject_copy_failures(std::uint32_t successes, std::uint32_t failures) noexcept {
  successes_left.store(successes, std::memory_order_relaxed);
  failures_left.store(failures, std::memory_order_relaxed);
}

bool take_injected_copy_failure() noexcept {
  if (failures_left.load(std::memory_order_relaxed) == 0) return false;
  if (take_one(successes_left)) return false;
  return take_one(failures_left);
}

std::uint32_t injected_copy_failures_left() noexcept { return failures_left.load(std::memory_order_relaxed); }

}  // namespace tether::transport::tcp
