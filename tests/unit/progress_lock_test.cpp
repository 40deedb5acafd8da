// The progress lock's bias towards the thread that made it, and mutual exclusion once
// another thread ends the bias (runs in the TSan stage too).
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/messaging/progress_lock.hpp"

namespace {

using tether::messaging::ProgressLock;

bool membarrier_available() {
  long commands = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
}

TEST(ProgressLockTest, TheThreadThatMadeItKeepsTheBias) {
  if (!membarrier_available()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here: the lock starts shared";
  ProgressLock lock;
  for (int i = 0; i < 1000; ++i) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_TRUE(lock.biased());
}

TEST(ProgressLockTest, ANestedTryFailsOnTheHomeThreadAndAfterTheBias) {
  ProgressLock lock;
  lock.lock();
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  std::thread([&] {
    ASSERT_TRUE(lock.try_lock());  // ends the bias
    EXPECT_FALSE(lock.try_lock());
    lock.unlock();
  }).join();
  EXPECT_FALSE(lock.biased());
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
}

// The other thread ends the bias while the home thread holds the lock: it must wait.
TEST(ProgressLockTest, EndingTheBiasWaitsForTheHomeThreadsHold) {
  ProgressLock lock;
  lock.lock();
  std::atomic<bool> entered{false};
  std::thread other([&] {
    lock.lock();
    entered.store(true);
    lock.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(entered.load()) << "a second thread entered while the home thread held the lock";
  lock.unlock();
  other.join();
  EXPECT_TRUE(entered.load());
  EXPECT_FALSE(lock.biased());
}

// Two threads count under the lock, the home one first alone (biased), then both.
TEST(ProgressLockTest, TwoThreadsNeverHoldItAtOnce) {
  constexpr int kRounds = 100000;
  ProgressLock lock;
  std::uint64_t counted = 0;  // plain: only the holder touches it
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  auto count = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      lock.lock();
      if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
      ++counted;
      inside.fetch_sub(1, std::memory_order_relaxed);
      lock.unlock();
    }
  };
  count(kRounds);
  std::thread other(count, kRounds);
  count(kRounds);
  other.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counted, 3U * kRounds);
  EXPECT_FALSE(lock.biased());
}

}  // namespace
