// How often a waiting loop gives its CPU away: every 64 polls, or every poll when this
// node's ranks outnumber the CPUs a rank may run on (TETHER_YIELD, set by the engine at
// start-up): a rank spinning on a shared core delays the very peer it waits for.
#pragma once

#include <atomic>
#include <thread>

namespace tether::base {

inline std::atomic<unsigned> g_polls_per_yield{64};

// A waiting loop's unsuccessful polls, counted down to the next yield (no division per
// poll). One per wait: construct it where the loop starts.
class YieldCountdown {
 public:
  YieldCountdown() noexcept : per_yield_(g_polls_per_yield.load(std::memory_order_relaxed)), left_(per_yield_) {}

  // Polls left before the next yield (a caller may spend them in a burst).
  [[nodiscard]] unsigned left() const noexcept { return left_; }
  void spend() noexcept { --left_; }
  // Yields once the polls are spent, and starts counting again.
  void yield_if_due() noexcept {
    if (left_ != 0) return;
    left_ = per_yield_;
    std::this_thread::yield();
  }
  // After one unsuccessful poll.
  void after_poll() noexcept {
    spend();
    yield_if_due();
  }

 private:
  unsigned per_yield_;
  unsigned left_;
};

}  // namespace tether::base
