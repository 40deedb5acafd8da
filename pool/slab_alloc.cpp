// SlabPool allocation and release: thread-cache fast paths, central lists, large buffers.
#include <bit>

#include <fmt/format.h>

#include "pool/slab_pool.hpp"
#include "pool/thread_cache.hpp"
#include "runtime/base/log.hpp"

namespace tether::pool {
namespace {

thread_local Error t_last_error;
constexpr std::size_t kLargeCacheBytes = std::size_t{64} << 20;
constexpr std::size_t kWideStateObjectBytes = 4096;  // few objects per span: a line each

Expected<void> check_request(std::size_t size, std::size_t alignment) {
  if (size == 0)
    return make_error(Errc::invalid_argument, "pinned_alloc of 0 bytes", "ask for at least 1 byte");
  if (alignment == 0 || !is_power_of_two(alignment))
    return make_error(Errc::invalid_argument, fmt::format("alignment {} is not a power of two", alignment),
                      "pass 1, 2, 4, ... or leave the default (16)");
  if (size > (std::size_t{1} << 46))
    return make_error(Errc::invalid_argument, fmt::format("pinned_alloc({}, {}) is beyond any pool", size, alignment),
                      "check the size computation; the pool serves at most TETHER_POOL_MAX");
  // Arenas start on 2M boundaries and blocks are placed within them: no larger alignment holds.
  if (alignment > kArenaAlignment)
    return make_error(Errc::invalid_argument,
                      fmt::format("pinned_alloc({}, {}) asks for an alignment above the pool's 2M", size, alignment),
                      "ask for at most 2M alignment (a huge page), or map such memory yourself");
  return {};
}

void* hand_out(FreeList& list) noexcept {
  void* object = pop(list);
  remembered_state(object)->store(Span::kLive, std::memory_order_relaxed);
  return object;
}

void shape_span(Span* span, int size_class) {
  span->size_class = size_class;
  bool large = size_class == kNotAClass;
  std::size_t object_bytes = large ? span->bytes : class_bytes(size_class);
  span->object_bytes = static_cast<std::uint32_t>(std::min<std::size_t>(object_bytes, UINT32_MAX));
  span->object_count = large ? 1 : static_cast<std::uint32_t>(span->bytes / object_bytes);
  span->thirds = !large && size_class % 2 == 1;
  span->index_shift = static_cast<std::uint8_t>(
      large ? 0 : std::countr_zero(span->thirds ? object_bytes / 3 : object_bytes));
  span->state_stride = object_bytes >= kWideStateObjectBytes ? 64 : 1;
  if (!span->states)
    span->states.reset(new std::atomic<std::uint8_t>[std::size_t{span->object_count} * span->state_stride]());
}

}  // namespace

void* SlabPool::allocate(std::size_t size, std::size_t alignment) noexcept {
  ThreadCache* cache = t_thread_caches[id_];
  if (void* object = allocate_from_thread_cache(cache != nullptr ? *cache : g_no_thread_cache, size, alignment))
    return object;
  auto slow = try_allocate(size, alignment);
  if (slow) return *slow;
  t_last_error = slow.error();
  log::warn("pool", "{}", t_last_error.message());
  return nullptr;
}

Expected<void*> SlabPool::try_allocate(std::size_t size, std::size_t alignment) {
  if (inherited_by_fork(id_))
    return make_error(Errc::unsupported, fmt::format("pinned_alloc({}) in a forked child", size),
                      "the pinned pool stays with the parent process (its arenas are not inherited by fork()); "
                      "allocate with malloc in the child, or exec a program that starts its own runtime");
  auto valid = check_request(size, alignment);
  if (!valid) return tl::unexpected(valid.error());
  int size_class = class_for(size, alignment);
  if (size_class == kNotAClass) return allocate_large(size, alignment);
  return allocate_small(size_class);
}

Expected<void*> SlabPool::allocate_small(int size_class) {
  ThreadCache* cache = thread_cache_for(this, id_);
  FreeList exiting_list;  // a thread past its exit hook: one object, nothing left behind in it
  FreeList& list = cache != nullptr ? cache->lists[size_class] : exiting_list;
  std::uint32_t want = cache != nullptr ? std::max<std::uint32_t>(1, cache_limits_[size_class] / 2) : 1;
  if (list.head == nullptr) refill(list, size_class, want);
  if (list.head == nullptr) return tl::unexpected(t_last_error);
  return hand_out(list);
}

void SlabPool::refill(FreeList& list, int size_class, std::uint32_t want) noexcept {
  CentralList& central = central_[size_class];
  std::lock_guard lock(central.mutex);
  if (central.list.count.load(std::memory_order_relaxed) < want && !refill_central(size_class) &&
      central.list.head == nullptr)
    return;
  while (want-- > 0 && central.list.head != nullptr) push(list, pop(central.list));
}

void SlabPool::drain(FreeList& list, int size_class, std::uint32_t keep) noexcept {
  CentralList& central = central_[size_class];
  std::lock_guard lock(central.mutex);
  while (list.count.load(std::memory_order_relaxed) > keep) push(central.list, pop(list));
}

bool SlabPool::refill_central(int size_class) noexcept {
  auto carved = carve_span(span_bytes(size_class), kBlockBytes, size_class);
  if (!carved) {
    t_last_error = carved.error();
    return false;
  }
  Span* span = *carved;
  FreeList& list = central_[size_class].list;
  for (std::uint32_t i = span->object_count; i-- > 0;) {
    std::byte* object = span->start + std::size_t{i} * span->object_bytes;
    remember_state(object, &span->state(i));
    push(list, object);
  }
  objects_carved_[size_class] += span->object_count;
  return true;
}

Expected<Span*> SlabPool::carve_span(std::size_t bytes, std::size_t alignment, int size_class) {
  std::size_t blocks = (bytes + kBlockBytes - 1) / kBlockBytes;
  std::size_t alignment_blocks = std::max<std::size_t>(1, alignment / kBlockBytes);
  std::lock_guard lock(growth_mutex_);
  Span* span = carve_from_arenas(blocks, alignment_blocks, size_class);
  if (span == nullptr) {
    auto arena = grow(blocks * kBlockBytes + (alignment_blocks - 1) * kBlockBytes);
    // At the limit: large buffers freed into the caches give their blocks back first.
    if (!arena && !return_cached_large_locked()) return tl::unexpected(arena.error());
    span = carve_from_arenas(blocks, alignment_blocks, size_class);
    if (span == nullptr && !arena) return tl::unexpected(arena.error());
  }
  if (span == nullptr)
    return make_error(Errc::out_of_memory, "a fresh arena had no room for the span", "report this as a bug");
  shape_span(span, size_class);
  std::uint64_t carved = (bytes_carved_ += span->bytes);
  std::uint64_t high = high_water_.load();
  while (carved > high && !high_water_.compare_exchange_weak(high, carved)) {}
  return span;
}

Span* SlabPool::new_span(int size_class) noexcept {
  if (size_class != kNotAClass || spare_large_spans_.empty()) return new Span;
  Span* span = spare_large_spans_.back();
  spare_large_spans_.pop_back();
  return span;
}

Span* SlabPool::carve_from_arenas(std::size_t blocks, std::size_t alignment_blocks, int size_class) noexcept {
  for (auto& arena : arenas_) {
    std::lock_guard heap_lock(arena->heap_mutex);
    auto first = arena->blocks.take(static_cast<std::uint32_t>(blocks), static_cast<std::uint32_t>(alignment_blocks));
    if (!first) continue;
    Span* span = new_span(size_class);
    span->start = arena->mapping.base + std::size_t{*first} * kBlockBytes;
    span->bytes = blocks * kBlockBytes;
    span->arena = arena.get();
    span->owner = this;
    g_span_map.set(span->start, span->bytes, span);  // leaves exist: the arena's granules are mapped
    return span;
  }
  return nullptr;
}

Span* SlabPool::take_cached_large(std::size_t bytes, std::size_t alignment) noexcept {
  auto fits = [&](const Span* span) {
    return span != nullptr && span->bytes == bytes && reinterpret_cast<std::uintptr_t>(span->start) % alignment == 0;
  };
  if (ThreadCache* cache = t_thread_caches[id_]) {
    for (std::atomic<Span*>& slot : cache->large_spans) {
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      // Taken before it is read: another thread may take it back (and reuse its record) meanwhile.
      Span* mine = slot.exchange(nullptr, std::memory_order_acquire);
      if (fits(mine)) return mine;
      if (mine != nullptr) slot.store(mine, std::memory_order_release);  // only this thread fills its slots
    }
  }
  std::lock_guard lock(large_mutex_);
  for (auto [it, end] = large_cache_.equal_range(bytes); it != end; ++it) {
    if (!fits(it->second)) continue;
    Span* span = it->second;
    large_cache_bytes_ -= bytes;
    large_cache_.erase(it);
    return span;
  }
  return nullptr;
}

Expected<void*> SlabPool::allocate_large(std::size_t size, std::size_t alignment) {
  std::size_t bytes = (size + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
  Span* span = take_cached_large(bytes, alignment);
  if (span == nullptr) {
    auto carved = carve_span(bytes, alignment, kNotAClass);
    if (!carved) return tl::unexpected(carved.error());
    span = *carved;
  }
  span->state(0).store(Span::kLive, std::memory_order_relaxed);
  if (ThreadCache* cache = t_thread_caches[id_]) count_one(cache->large_allocations);
  else large_allocations_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<void*>(span->start);
}

Errc SlabPool::deallocate(void* pointer) noexcept {
  if (pointer == nullptr) return Errc::ok;
  Span* span = span_map_find(pointer);
  if (span == nullptr || span->owner != this) {
    Arena* arena = arena_map_find(pointer);
    return refuse_free(Errc::not_from_pool, pointer,
                       arena != nullptr && arena->owner == this ? "it lies in an arena but in no buffer handed out"
                                                                 : "it is not in any arena of this pool");
  }
  return release(span, pointer);
}

Errc SlabPool::release(Span* span, void* pointer) noexcept {
  if (inherited_by_fork(id_)) return Errc::ok;  // a forked child has no arena to free into
  if (!span->contains(pointer))
    return refuse_free(Errc::not_from_pool, pointer, "it lies in an arena but in no buffer handed out");
  if (span->size_class == kNotAClass) return free_large(span, pointer);
  return free_small(span, pointer);
}

Errc SlabPool::free_small(Span* span, void* pointer) noexcept {
  if (free_to_thread_cache(*span, pointer)) return Errc::ok;
  std::int64_t index = span->object_index(pointer);
  if (index < 0)
    return refuse_free(Errc::invalid_argument, pointer,
                       fmt::format("it points inside a {}-byte buffer, not at its start", span->object_bytes));
  auto& state = span->state(static_cast<std::size_t>(index));
  if (state.load(std::memory_order_relaxed) != Span::kLive)
    return refuse_free(Errc::double_free, pointer, "it was freed already");
  state.store(Span::kFree, std::memory_order_relaxed);
  remember_state(pointer, &state);
  int size_class = span->size_class;
  ThreadCache* cache = t_thread_caches[id_];
  if (cache == nullptr) return free_without_cache(size_class, pointer);
  std::uint32_t length = push(cache->lists[size_class], pointer);
  if (length > cache_limits_[size_class]) drain(cache->lists[size_class], size_class, cache_limits_[size_class] / 2);
  return Errc::ok;
}

Errc SlabPool::free_without_cache(int size_class, void* pointer) noexcept {
  ThreadCache* cache = thread_cache_for(this, id_);
  FreeList exiting_list;
  FreeList& list = cache != nullptr ? cache->lists[size_class] : exiting_list;
  std::uint32_t limit = cache != nullptr ? cache_limits_[size_class] : 0;
  if (push(list, pointer) > limit) drain(list, size_class, limit / 2);
  return Errc::ok;
}

bool SlabPool::cache_large(Span* span) noexcept {
  std::lock_guard lock(large_mutex_);
  if (large_cache_bytes_ + span->bytes > kLargeCacheBytes) return false;
  large_cache_.emplace(span->bytes, span);
  large_cache_bytes_ += span->bytes;
  return true;
}

Errc SlabPool::free_large(Span* span, void* pointer) noexcept {
  if (pointer != span->start)
    return refuse_free(Errc::invalid_argument, pointer,
                       fmt::format("it points inside a {}-byte buffer, not at its start", span->bytes));
  if (span->state(0).exchange(Span::kFree, std::memory_order_relaxed) != Span::kLive)
    return refuse_free(Errc::double_free, pointer, "it was freed already");
  ThreadCache* cache = thread_cache_for(this, id_);
  if (cache != nullptr) count_one(cache->large_frees);
  else large_frees_.fetch_add(1, std::memory_order_relaxed);
  if (cache != nullptr) {
    for (std::atomic<Span*>& slot : cache->large_spans) {
      if (slot.load(std::memory_order_relaxed) != nullptr) continue;
      slot.store(span, std::memory_order_release);  // only this thread fills its slots
      return Errc::ok;
    }
  }
  if (!cache_large(span)) release_large_run(span);
  return Errc::ok;
}

void SlabPool::release_large_run(Span* span) noexcept {
  std::lock_guard lock(growth_mutex_);
  release_large_run_locked(span);
}

// Every thread's cached large buffers, not only the caller's: a thread that freed some
// and lives on must not hold them while another fails at TETHER_POOL_MAX.
bool SlabPool::return_cached_large_locked() noexcept {
  bool returned = false;
  {
    std::lock_guard caches_lock(caches_mutex_);
    for (ThreadCache* cache : caches_) {
      for (std::atomic<Span*>& slot : cache->large_spans) {
        Span* span = slot.exchange(nullptr, std::memory_order_acquire);
        if (span == nullptr) continue;
        release_large_run_locked(span);
        returned = true;
      }
    }
  }
  std::lock_guard lock(large_mutex_);
  for (auto& [bytes, span] : large_cache_) {
    release_large_run_locked(span);
    returned = true;
  }
  large_cache_.clear();
  large_cache_bytes_ = 0;
  return returned;
}

void SlabPool::release_large_run_locked(Span* span) noexcept {
  Arena* arena = span->arena;
  std::size_t first = arena->block_of(span->start);
  std::size_t blocks = span->bytes / kBlockBytes;
  {
    std::lock_guard heap_lock(arena->heap_mutex);
    g_span_map.set(span->start, span->bytes, nullptr);
    arena->blocks.give_back(static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(blocks));
  }
  bytes_carved_ -= span->bytes;
  spare_large_spans_.push_back(span);  // kept: a racing bad free may still read it
}

Errc SlabPool::refuse_free(Errc code, const void* pointer, std::string_view why) noexcept {
  bad_frees_.fetch_add(1, std::memory_order_relaxed);
  log::error("pool", "pinned_free({}) refused: {}; the pool is unchanged (free only what "
             "pinned_alloc returned, once)", pointer, why);
  return code;
}

const Error& last_allocation_error() noexcept { return t_last_error; }

}  // namespace tether::pool
