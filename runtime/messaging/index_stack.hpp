// A lock-free stack of the indices 0 .. capacity-1 (the request table's free slots): one
// array of links and a head word that carries a count bumped by every push and pop, so a
// head that was popped and pushed back in between fails the compare (no ABA). It is made
// full with one allocation; a stack of one node per index cost 65,536 allocations and
// frees per engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace tether::messaging {

class IndexStack {
 public:
  // Holds every index below `capacity`, 0 on top.
  explicit IndexStack(std::uint32_t capacity)
      : below_(std::make_unique<std::atomic<std::uint32_t>[]>(capacity)),
        head_(capacity == 0 ? kNone : 0) {
    for (std::uint32_t index = 0; index < capacity; ++index)
      below_[index].store(index + 1 < capacity ? index + 1 : kNone, std::memory_order_relaxed);
  }

  [[nodiscard]] bool pop(std::uint32_t& index) noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      auto top = static_cast<std::uint32_t>(head);
      if (top == kNone) return false;
      std::uint32_t next = below_[top].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, bumped(head, next), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        index = top;
        return true;
      }
    }
  }

  // `index` must be one that pop() gave and nobody pushed since.
  void push(std::uint32_t index) noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    do {
      below_[index].store(static_cast<std::uint32_t>(head), std::memory_order_relaxed);
    } while (!head_.compare_exchange_weak(head, bumped(head, index), std::memory_order_release,
                                          std::memory_order_relaxed));
  }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffU;
  static std::uint64_t bumped(std::uint64_t head, std::uint32_t top) noexcept {
    return ((head >> 32) + 1) << 32 | top;
  }

  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  std::unique_ptr<std::atomic<std::uint32_t>[]> below_;  // per index: the one under it
  // count << 32 | top index (kNone: empty). A line of its own: every pop and push writes it.
  alignas(64) std::atomic<std::uint64_t> head_;
};

}  // namespace tether::messaging
