// Per-thread free lists, one per size class and pool. A thread frees into its own cache
// whatever thread allocated the buffer; overflow goes back to the pool's central lists.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pool/slab_pool.hpp"

namespace tether::pool {

struct ThreadCache {
  constexpr explicit ThreadCache(SlabPool* owner) : pool(owner) {}

  SlabPool* pool;
  std::array<FreeList, kClassCount> lists{};
  // Recently freed large buffers, reused without a lock. Only the owner fills a slot; any
  // thread may empty one (exchange), so a pool at its limit can take them all back.
  std::array<std::atomic<Span*>, 4> large_spans{};
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

// Pushes onto a list whose length the caller has just read as `count`; returns the new one.
inline std::uint32_t push(FreeList& list, void* object, std::uint32_t count) noexcept {
  static_cast<void**>(object)[0] = list.head;
  list.head = object;
  list.count.store(count + 1, std::memory_order_relaxed);
  return count + 1;
}

// Returns the list's new length.
inline std::uint32_t push(FreeList& list, void* object) noexcept {
  return push(list, object, list.count.load(std::memory_order_relaxed));
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

// Whether a request is in the small-class table: 1..1024 bytes (unsigned wrap-around
// rejects 0) at an alignment of 1, 2, 4, 8 or 16.
inline bool in_class_table(std::size_t size, std::size_t alignment) noexcept {
  constexpr std::uint32_t kSmallAlignments = 0x10116;  // bits 1, 2, 4, 8, 16
  return size - 1 < kTableMaxBytes && alignment <= 16 && ((kSmallAlignments >> alignment) & 1) != 0;
}

inline int table_class(std::size_t size) noexcept { return kSmallClassTable[(size + 15) >> 4]; }

// The size class of a request the table does not hold, or kNotAClass.
inline int other_class(std::size_t size, std::size_t alignment) noexcept {
  if (size == 0 || !is_power_of_two(alignment)) return kNotAClass;
  return class_for(size, alignment);
}

// An object of `size_class` from `cache`, or nullptr when its list is empty.
inline void* pop_from_thread_cache(ThreadCache& cache, int size_class) noexcept {
  FreeList& list = cache.lists[size_class];
  if (list.head == nullptr) return nullptr;
  void* object = pop(list);
  remembered_state(object)->store(Span::kLive, std::memory_order_relaxed);
  return object;
}

// Stands in for a thread cache not made yet (or gone at thread exit): its lists stay
// empty, so the allocation fast path needs no null check; nothing writes to it.
inline constinit ThreadCache g_no_thread_cache{nullptr};

// The allocation fast path, inline so that pinned_alloc makes no further call: an object
// from `cache`, or nullptr for SlabPool::allocate's slow path (empty list, or a request no
// class serves). A thread without a cache passes g_no_thread_cache (below).
inline void* allocate_from_thread_cache(ThreadCache& cache, std::size_t size, std::size_t alignment) noexcept {
  if (in_class_table(size, alignment)) [[likely]]
    return pop_from_thread_cache(cache, table_class(size));
  int size_class = other_class(size, alignment);
  return size_class == kNotAClass ? nullptr : pop_from_thread_cache(cache, size_class);
}

// The free fast path for a pointer inside a slab span's objects: true once the object is
// in this thread's cache. False leaves everything as it was for SlabPool::free_small,
// which refuses bad frees with a logged error and drains a full cache.
inline bool free_to_thread_cache(Span& span, void* pointer) noexcept {
  std::int64_t index = span.object_index(pointer);
  if (index < 0) return false;
  auto& state = span.state(static_cast<std::size_t>(index));
  if (state.load(std::memory_order_relaxed) != Span::kLive) return false;
  ThreadCache* cache = t_thread_caches[span.owner->id()];
  if (cache == nullptr) return false;
  FreeList& list = cache->lists[span.size_class];
  if (list.count.load(std::memory_order_relaxed) >= span.owner->cache_limit(span.size_class)) return false;
  state.store(Span::kFree, std::memory_order_relaxed);
  remember_state(pointer, &state);
  push(list, pointer);
  return true;
}

// The slab span this thread freed into last, with what its free fast path reads (copied
// here, one cache line): consecutive frees from one span skip the address map and the
// pool. Only slab spans are remembered: they are never released or reused. `list` is this
// thread's cache list of the span's class; the thread's exit clears the whole record.
struct alignas(64) RecentSpan {
  std::uintptr_t start = 0;
  std::size_t bytes = 0;
  std::size_t misaligned = 0;  // offset bits that must be zero: (1 << index_shift) - 1
  FreeList* list = nullptr;
  std::atomic<std::uint8_t>* states = nullptr;
  std::uint32_t state_stride = 1;
  std::uint32_t cache_limit = 0;
  std::uint8_t index_shift = 0;
  // Not thirds: an object's state is at states + (offset >> state_shift), which is
  // index * state_stride for a stride of 1 or 64 (offsets are multiples of the object size).
  std::uint8_t state_shift = 0;
  bool thirds = false;
};
inline thread_local RecentSpan t_recent_span __attribute__((tls_model("initial-exec"))){};

// The free fast path for a pointer inside the recent span: true once the object is in
// this thread's cache. False leaves everything as it was for SlabPool::free_small.
// The record's fields are read into locals first: the stores into the object could alias
// the record as far as the compiler knows.
inline bool free_to_recent_span(const RecentSpan& recent, void* pointer) noexcept {
  std::size_t offset = reinterpret_cast<std::uintptr_t>(pointer) - recent.start;
  if ((offset & recent.misaligned) != 0) return false;
  std::size_t state_offset = offset >> recent.state_shift;
  if (recent.thirds) [[unlikely]] {
    std::size_t index = offset >> recent.index_shift;
    if (index % 3 != 0) return false;
    state_offset = index / 3 * recent.state_stride;
  }
  auto& state = recent.states[state_offset];
  FreeList& list = *recent.list;
  std::uint32_t limit = recent.cache_limit;
  if (state.load(std::memory_order_relaxed) != Span::kLive) return false;
  std::uint32_t count = list.count.load(std::memory_order_relaxed);
  if (count >= limit) return false;
  state.store(Span::kFree, std::memory_order_relaxed);
  remember_state(pointer, &state);
  push(list, pointer, count);
  return true;
}

// This thread's cache of the process-wide pool (pinned_alloc's), once it has one.
inline thread_local ThreadCache* t_global_pool_cache __attribute__((tls_model("initial-exec"))) = &g_no_thread_cache;

// Creates this thread's cache for the pool; nullptr once the thread is exiting.
ThreadCache* create_thread_cache(SlabPool* pool, int pool_id) noexcept;

inline ThreadCache* thread_cache_for(SlabPool* pool, int pool_id) noexcept {
  ThreadCache* cache = t_thread_caches[pool_id];
  return cache != nullptr ? cache : create_thread_cache(pool, pool_id);
}

}  // namespace tether::pool
