// The progress engine's lock: one word, test and set. Taking it free is one exchange and
// giving it back one store; a pthread mutex pays a call and a locked instruction both
// ways, on every progress pass of every waiting loop. A waiter spins a little, then
// yields: the holder is in one progress pass, microseconds at most.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <thread>

namespace tether::messaging {

class ProgressLock {
 public:
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void lock() noexcept {
    for (unsigned tries = 1; !try_lock(); ++tries) {
      if (tries % kSpinsPerYield == 0) std::this_thread::yield();
      else _mm_pause();
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpinsPerYield = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace tether::messaging
