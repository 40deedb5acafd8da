// The request table's free-slot stack: order, emptiness, and threads popping and pushing
// at once never holding the same index twice (run under TSan by the thread-tests target).
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/messaging/index_stack.hpp"

namespace {

using tether::messaging::IndexStack;

TEST(IndexStack, StartsFullWithZeroOnTopAndEmptiesInOrder) {
  IndexStack stack(5);
  std::uint32_t index = 99;
  for (std::uint32_t expected = 0; expected < 5; ++expected) {
    ASSERT_TRUE(stack.pop(index));
    EXPECT_EQ(index, expected);
  }
  EXPECT_FALSE(stack.pop(index));
  stack.push(3);
  stack.push(1);
  ASSERT_TRUE(stack.pop(index));
  EXPECT_EQ(index, 1U);
  ASSERT_TRUE(stack.pop(index));
  EXPECT_EQ(index, 3U);
  EXPECT_FALSE(stack.pop(index));
}

TEST(IndexStack, OfCapacityZeroIsEmpty) {
  IndexStack stack(0);
  std::uint32_t index = 0;
  EXPECT_FALSE(stack.pop(index));
}

// Each thread pops an index, writes and reads back a plain (non-atomic) word of it, as a
// request slot's owner does, and pushes it back: two holders at once show as a changed
// word (and to TSan as a race, also if pop or push lost their ordering). At the end every
// index is in the stack exactly once.
TEST(IndexStack, ConcurrentPopsAndPushesNeverShareAnIndex) {
  constexpr std::uint32_t kIndices = 8;
  constexpr int kThreads = 4;
  constexpr int kRounds = 400000;
  IndexStack stack(kIndices);
  std::vector<std::uint64_t> owner_word(kIndices, 0);
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::uint32_t index = 0;
        if (!stack.pop(index)) continue;
        std::uint64_t mine = static_cast<std::uint64_t>(t) << 32 | static_cast<std::uint32_t>(round);
        owner_word[index] = mine;
        std::atomic_signal_fence(std::memory_order_seq_cst);  // read the word again, not the value kept
        if (owner_word[index] != mine) shared.fetch_add(1);
        stack.push(index);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(shared.load(), 0);
  std::vector<int> seen(kIndices, 0);
  std::uint32_t index = 0;
  for (std::uint32_t pops = 0; stack.pop(index); ++pops) {  // a broken stack may hold a cycle
    ASSERT_LT(pops, kIndices) << "more pops than indices";
    ASSERT_LT(index, kIndices);
    ++seen[index];
  }
  for (std::uint32_t i = 0; i < kIndices; ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

}  // namespace
