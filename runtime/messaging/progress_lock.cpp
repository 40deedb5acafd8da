// The progress lock's cold half: choosing the bias at construction and ending it.
#include "runtime/messaging/progress_lock.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "runtime/base/log.hpp"

namespace tether::messaging {
namespace {

int membarrier(int command) noexcept { return static_cast<int>(::syscall(__NR_membarrier, command, 0, 0)); }

// Every thread of this process has passed a full memory barrier when this returns.
bool barrier_on_every_thread() noexcept {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return true;
  // Fork keeps the registration (exec drops it); a process restored by a checkpoint tool
  // may have lost it.
  return errno == EPERM && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
         membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

ProgressLock::ProgressLock() noexcept : home_(__builtin_thread_pointer()) {
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) mode_.store(Mode::biased, std::memory_order_release);
}

// A thread other than the home one while the lock is biased, or any thread (the home one
// too) that finds the bias ending.
void ProgressLock::end_bias() noexcept {
  Mode biased = Mode::biased;
  if (mode_.compare_exchange_strong(biased, Mode::ending_bias, std::memory_order_relaxed))
    log::info("runtime", "a thread other than the runtime's creator wants the progress lock: every thread "
              "takes it with a locked instruction from now on");
  if (!barrier_on_every_thread()) {
    // Registered when the lock was made: only a seccomp filter installed since (denying
    // membarrier) gets here. Going on could let two threads in at once.
    log::error("runtime", "membarrier(PRIVATE_EXPEDITED) failed (errno {}): the progress lock cannot end its bias "
               "towards the thread that created the runtime; call tether from that thread only", errno);
    std::abort();
  }
  mode_.store(Mode::shared, std::memory_order_release);
}

}  // namespace tether::messaging
