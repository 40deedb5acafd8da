// The progress engine's lock, biased towards the thread that made it (the one that created
// the runtime, in most programs the only one that calls it).
// - That home thread takes and gives back the lock with plain stores: no locked
//   instruction, which on this project's Xeon VM costs about 20 TSC cycles a pair (it
//   waits for the store buffer to drain), and a channel's ping-pong turn takes two.
// - The first time another thread wants the lock, it ends the bias for good: it marks the
//   lock shared, makes every thread of the process pass a full barrier (membarrier(2),
//   private expedited), then waits for the home thread to leave. From then on everyone,
//   the home thread too, takes one word with an exchange, as a waiter spinning (the holder
//   is in a progress pass, or a wait's burst of up to 64): it yields on every try when
//   ranks outnumber the CPUs, else sleeps a moment once it has spun 20 us
//   (base::YieldCountdown).
// - Without membarrier (an old kernel, a seccomp filter) the lock starts shared. A filter
//   denying membarrier installed after the runtime started aborts the bias's end.
// - While the bias ends (once), try_lock() may fail with nobody holding the lock; every
//   caller retries or leaves its command queued for the next pass.
// Why the plain stores are enough: the home thread stores `home_inside_` and then reads
// the mode; a thread ending the bias stores the mode, then the barrier, then reads
// `home_inside_`. Either the home thread reads a mode other than biased (and backs off),
// or its store is visible to the other thread after the barrier (which then waits for it).
// unlock() must come from the thread that took the lock.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "runtime/base/yield.hpp"

namespace tether::messaging {

class ProgressLock {
 public:
  ProgressLock() noexcept;
  ProgressLock(const ProgressLock&) = delete;
  ProgressLock& operator=(const ProgressLock&) = delete;

  bool try_lock() noexcept {
    Mode mode = mode_.load(std::memory_order_acquire);
    if (mode == Mode::biased && on_home_thread()) return try_lock_at_home();
    if (mode != Mode::shared) end_bias();
    return try_lock_shared();
  }
  void lock() noexcept {
    for (base::YieldCountdown countdown(kLockSpinBeforeSleep); !try_lock(); countdown.after_poll()) _mm_pause();
  }
  void unlock() noexcept {
    if (home_inside_.load(std::memory_order_relaxed) && on_home_thread())
      return home_inside_.store(false, std::memory_order_release);
    locked_.store(false, std::memory_order_release);
  }
  // For tests: the home thread still takes the lock without a locked instruction.
  [[nodiscard]] bool biased() const noexcept { return mode_.load(std::memory_order_acquire) == Mode::biased; }

 private:
  enum class Mode : std::uint8_t { shared, ending_bias, biased };
  // Longer than a progress pass: the holder has likely lost its CPU, maybe to this waiter.
  static constexpr std::chrono::microseconds kLockSpinBeforeSleep{20};

  [[nodiscard]] bool on_home_thread() const noexcept { return __builtin_thread_pointer() == home_; }
  bool try_lock_at_home() noexcept {
    if (home_inside_.load(std::memory_order_relaxed)) return false;  // a nested try on the home thread
    home_inside_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // end_bias()'s barrier orders it against the load below
    if (mode_.load(std::memory_order_relaxed) == Mode::biased) return true;
    home_inside_.store(false, std::memory_order_release);
    return try_lock_shared();
  }
  bool try_lock_shared() noexcept {
    if (locked_.load(std::memory_order_relaxed) || locked_.exchange(true, std::memory_order_acquire)) return false;
    if (!home_inside_.load(std::memory_order_acquire)) return true;
    locked_.store(false, std::memory_order_release);  // the home thread still holds its biased hold
    return false;
  }
  void end_bias() noexcept;  // cold: once per process and lock

  std::atomic<Mode> mode_{Mode::shared};
  std::atomic<bool> home_inside_{false};  // written by the home thread only
  std::atomic<bool> locked_{false};
  void* home_ = nullptr;  // the home thread's thread pointer
};

}  // namespace tether::messaging
