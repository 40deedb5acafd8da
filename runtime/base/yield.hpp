// How often a waiting loop gives its CPU away: every 64 polls, or every poll when this
// node's ranks outnumber the CPUs a rank may run on (TETHER_YIELD, set by the engine at
// start-up): a rank spinning on a shared core delays the very peer it waits for.
#pragma once

#include <atomic>
#include <thread>

namespace tether::base {

inline std::atomic<unsigned> g_polls_per_yield{64};

// Call once per unsuccessful poll of a waiting loop, `polls` counting from 1.
inline void pause_while_waiting(unsigned polls) noexcept {
  if (polls % g_polls_per_yield.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
}

}  // namespace tether::base
