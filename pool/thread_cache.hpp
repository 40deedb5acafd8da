// Per-thread free lists, one per size class and pool. A thread frees into its own cache
// whatever thread allocated the buffer; overflow goes back to the pool's central lists.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pool/slab_pool.hpp"

namespace tether::pool {

struct ThreadCache {
  explicit ThreadCache(SlabPool* owner) : pool(owner) {}

  SlabPool* pool;
  std::array<FreeList, kClassCount> lists{};
  std::array<Span*, 4> large_spans{};  // recently freed large buffers, reused lock-free
  // Written by the owner only (no shared cache line on the large-buffer path).
  std::atomic<std::uint64_t> large_allocations{0};
  std::atomic<std::uint64_t> large_frees{0};
};

inline void count_one(std::atomic<std::uint64_t>& counter) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Returns the new count.
inline std::uint32_t add_count(FreeList& list, std::int32_t delta) noexcept {
  auto count = list.count.load(std::memory_order_relaxed) + static_cast<std::uint32_t>(delta);
  list.count.store(count, std::memory_order_relaxed);
  return count;
}

inline void* pop(FreeList& list) noexcept {
  void* head = list.head;
  list.head = static_cast<void**>(head)[0];
  add_count(list, -1);
  return head;
}

// Returns the list's new length.
inline std::uint32_t push(FreeList& list, void* object) noexcept {
  static_cast<void**>(object)[0] = list.head;
  list.head = object;
  return add_count(list, 1);
}

inline void remember_state(void* object, std::atomic<std::uint8_t>* state) noexcept {
  static_cast<void**>(object)[1] = state;
}

inline std::atomic<std::uint8_t>* remembered_state(void* object) noexcept {
  return static_cast<std::atomic<std::uint8_t>**>(object)[1];
}

// initial-exec: the fast paths read this without a call to __tls_get_addr.
inline thread_local std::array<ThreadCache*, kMaxPools> t_thread_caches
    __attribute__((tls_model("initial-exec"))){};

// The slab span this thread freed into last: consecutive frees from one span skip the
// address map. Only slab spans are remembered: they are never released or reused.
struct RecentSpan {
  std::uintptr_t start = 0;
  std::size_t bytes = 0;
  Span* span = nullptr;
};
inline thread_local RecentSpan t_recent_span __attribute__((tls_model("initial-exec"))){};

// Creates this thread's cache for the pool; nullptr once the thread is exiting.
ThreadCache* create_thread_cache(SlabPool* pool, int pool_id) noexcept;

inline ThreadCache* thread_cache_for(SlabPool* pool, int pool_id) noexcept {
  ThreadCache* cache = t_thread_caches[pool_id];
  return cache != nullptr ? cache : create_thread_cache(pool, pool_id);
}

}  // namespace tether::pool
