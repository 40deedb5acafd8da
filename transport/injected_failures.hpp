// Failure injection, for tests only: a counter a transport consults where a call may be
// made to fail. After `successes` more calls succeed, the next `failures` fail; (0, 0)
// disarms. Thread-safe; one per injection point, off unless a test arms it.
#pragma once

#include <atomic>
#include <cstdint>

namespace tether::transport {

class InjectedFailures {
 public:
  void arm(std::uint32_t successes, std::uint32_t failures) noexcept {
    successes_left_.store(successes, std::memory_order_relaxed);
    failures_left_.store(failures, std::memory_order_relaxed);
  }
  // Whether the call about to be made is to fail; counts it.
  [[nodiscard]] bool take() noexcept {
    if (failures_left_.load(std::memory_order_relaxed) == 0) return false;
    if (take_one(successes_left_)) return false;
    return take_one(failures_left_);
  }
  // Injected failures not yet taken.
  [[nodiscard]] std::uint32_t left() const noexcept { return failures_left_.load(std::memory_order_relaxed); }

 private:
  // Takes one from `counter` unless it is 0; whether it did.
  static bool take_one(std::atomic<std::uint32_t>& counter) noexcept {
    std::uint32_t seen = counter.load(std::memory_order_relaxed);
    while (seen > 0 && !counter.compare_exchange_weak(seen, seen - 1, std::memory_order_relaxed)) {
    }
    return seen > 0;
  }
  std::atomic<std::uint32_t> successes_left_{0};
  std::atomic<std::uint32_t> failures_left_{0};
};

}  // namespace tether::transport
