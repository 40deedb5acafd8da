// The progress engine's lock: one word, test and set. Taking it free is one exchange and
// giving it back one store; a pthread mutex pays a call and a locked instruction both
// ways, on every progress pass of every waiting loop. A waiter spins (the holder is in one
// progress pass, microseconds at most): it yields on every try when ranks outnumber the
// CPUs, else sleeps a moment once it has spun 20 us (base::YieldCountdown).
#pragma once

#include <immintrin.h>

#include <atomic>
#include <chrono>

#include "runtime/base/yield.hpp"

namespace tether::messaging {

class ProgressLock {
 public:
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void lock() noexcept {
    for (base::YieldCountdown countdown(kLockSpinBeforeSleep); !try_lock(); countdown.after_poll()) _mm_pause();
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  // Longer than a progress pass: the holder has likely lost its CPU, maybe to this waiter.
  static constexpr std::chrono::microseconds kLockSpinBeforeSleep{20};
  std::atomic<bool> locked_{false};
};

}  // namespace tether::messaging
