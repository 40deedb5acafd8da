// How a waiting loop gives its CPU away (TETHER_YIELD, set by the engine at start-up).
// - When this node's ranks outnumber the CPUs a rank may run on, every poll yields: a rank
//   spinning on a shared core delays the very peer it waits for, and that peer yields too.
// - Otherwise a waiter spins, looks at the clock every 64 polls, and only after spinning
//   kSpinBeforeSleep without result (the progress lock: 20 us) sleeps a moment.
// Not a sched_yield() every few polls: under EEVDF (Linux 6.6 and later) each yield charges
// the caller a whole time slice, so a loop that yields often, sharing a core with a thread
// that never yields (a user's loop retrying start()), gets next to no CPU. Measured on this
// project's 2-CPU VM (kernel 6.18), two threads on one core: 0.15% of it for the yielder;
// a receiving thread starved like this held a persist test's stream up for seconds. A short
// sleep keeps the sleeper's share.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tether::base {

inline std::atomic<unsigned> g_polls_per_yield{64};  // polls per look; 1: every poll yields

inline constexpr std::chrono::microseconds kSpinBeforeSleep{1000};

// Gives the CPU away for a moment (tens of microseconds with the kernel's timer slack).
inline void sleep_briefly() noexcept {
  timespec moment{0, 1000};
  ::nanosleep(&moment, nullptr);
}

// A waiting loop's unsuccessful polls, counted down to the next look at whether to give the
// CPU away (no division and no clock per poll). One per wait: construct it where the loop
// starts. A wait that ends within 64 polls never reads the clock.
class YieldCountdown {
 public:
  explicit YieldCountdown(std::chrono::microseconds spin_before_sleep = kSpinBeforeSleep) noexcept
      : per_yield_(g_polls_per_yield.load(std::memory_order_relaxed)), left_(per_yield_),
        spin_before_sleep_(spin_before_sleep) {}

  // Polls left before the next look (a caller may spend them in a burst).
  [[nodiscard]] unsigned left() const noexcept { return left_; }
  // Every poll yields: ranks outnumber the CPUs (TETHER_YIELD).
  [[nodiscard]] bool yields_every_poll() const noexcept { return per_yield_ == 1; }
  void spend() noexcept { --left_; }
  // Once the polls are spent: yields, or sleeps if this wait has spun long; counts again.
  void yield_if_due() noexcept {
    if (left_ != 0) return;
    left_ = per_yield_;
    if (per_yield_ == 1) return std::this_thread::yield();
    sleep_if_spun_long();
  }
  // After one unsuccessful poll.
  void after_poll() noexcept {
    spend();
    yield_if_due();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void sleep_if_spun_long() noexcept {
    const Clock::time_point now = Clock::now();
    if (!spinning_) {
      spinning_ = true;
      spinning_since_ = now;
      return;
    }
    if (now - spinning_since_ < spin_before_sleep_) return;
    sleep_briefly();
    spinning_since_ = Clock::now();
  }

  unsigned per_yield_;
  unsigned left_;
  std::chrono::microseconds spin_before_sleep_;
  bool spinning_ = false;
  Clock::time_point spinning_since_{};
};

}  // namespace tether::base
