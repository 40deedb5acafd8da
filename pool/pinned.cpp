// The public pool API over the process-wide SlabPool.
#include "pool/slab_pool.hpp"
#include "pool/thread_cache.hpp"
#include <bit>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "runtime/base/stats.hpp"

namespace tether {
namespace pool {
namespace {

std::atomic<SlabPool*> g_started_pool{nullptr};  // set once global_pool() succeeded

std::string describe(const PoolStats& stats) {
  std::string text = fmt::format(
      "bytes_mapped {}\nbytes_pinned {}\nbytes_carved {}\nhigh_water_bytes {}\narenas {}\n"
      "registrations {}\nderegistrations {}\nbad_frees {}\nlarge_allocations {}\nlarge_frees {}\n",
      stats.bytes_mapped, stats.bytes_pinned, stats.bytes_carved, stats.high_water_bytes, stats.arenas,
      stats.registrations, stats.deregistrations, stats.bad_frees, stats.large_allocations, stats.large_frees);
  for (const PoolClassStats& row : stats.classes)
    if (row.objects_carved > 0)
      text += fmt::format("class_{}_in_use {} of {}\n", row.object_bytes, row.objects_in_use, row.objects_carved);
  return text;
}

// Makes the slab span this thread's recent span (see RecentSpan).
void remember_recent_span(Span& span) noexcept {
  ThreadCache* cache = thread_cache_for(span.owner, span.owner->id());
  if (cache == nullptr) return;  // the thread is exiting
  t_recent_span = {.start = reinterpret_cast<std::uintptr_t>(span.start),
                   .bytes = std::size_t{span.object_bytes} * span.object_count,
                   .misaligned = (std::size_t{1} << span.index_shift) - 1,
                   .list = &cache->lists[span.size_class],
                   .states = span.states.get(),
                   .state_stride = span.state_stride,
                   .cache_limit = span.owner->cache_limit(span.size_class),
                   .index_shift = span.index_shift,
                   .state_shift = static_cast<std::uint8_t>(span.index_shift - std::countr_zero(span.state_stride)),
                   .thirds = span.thirds};
}

}  // namespace

const Expected<SlabPool*>& global_pool() {
  static const Expected<SlabPool*> pool = [] {
    auto options = PoolOptions::from_config(config::Config::global());
    auto created = options ? SlabPool::create(*options) : tl::unexpected(options.error());
    if (!created) log::error("pool", "the pinned pool could not start: {}", created.error().message());
    if (created) g_started_pool.store(*created, std::memory_order_release);
    if (created) stats::register_source("pool", [pool = *created] { return describe(pool->stats()); });
    return created;
  }();
  return pool;
}

namespace {

// pinned_alloc without an object in this thread's cache: the pool's slow path (which
// creates the cache), starting the pool first if need be.
[[gnu::noinline]] void* allocate_slowly(std::size_t size, std::size_t alignment) noexcept {
  SlabPool* started = g_started_pool.load(std::memory_order_acquire);
  if (started == nullptr) {
    const auto& pool = global_pool();
    if (!pool) return nullptr;
    started = *pool;
  }
  void* object = started->allocate(size, alignment);
  ThreadCache* cache = t_thread_caches[started->id()];
  t_global_pool_cache = cache != nullptr ? cache : &g_no_thread_cache;
  return object;
}

// pinned_free of a pointer outside the recent span, or one its fast path refused: found
// through the address maps; bad frees are refused with a logged error.
[[gnu::noinline]] void free_slowly(void* pointer) noexcept {
  if (pointer == nullptr) return;
  if (Span* span = span_map_find(pointer)) {
    if (span->size_class != kNotAClass && span->contains(pointer)) remember_recent_span(*span);
    (void)span->owner->release(span, pointer);
    return;
  }
  if (Arena* arena = arena_map_find(pointer)) {
    (void)arena->owner->deallocate(pointer);
    return;
  }
  const auto& pool = global_pool();
  if (pool) (void)(*pool)->deallocate(pointer);  // logs the refusal
}

}  // namespace
}  // namespace pool

Expected<void*> pinned_try_alloc(std::size_t size, std::size_t alignment) {
  const auto& pool = pool::global_pool();
  if (!pool) return tl::unexpected(pool.error());
  return (*pool)->try_allocate(size, alignment);
}

void* pinned_alloc(std::size_t size, std::size_t alignment) noexcept {
  if (void* object = pool::allocate_from_thread_cache(*pool::t_global_pool_cache, size, alignment)) return object;
  return pool::allocate_slowly(size, alignment);
}

void pinned_free(void* pointer) noexcept {
  const pool::RecentSpan& recent = pool::t_recent_span;
  if (reinterpret_cast<std::uintptr_t>(pointer) - recent.start < recent.bytes &&
      pool::free_to_recent_span(recent, pointer))
    return;
  pool::free_slowly(pointer);
}

const Error& pinned_last_error() noexcept {
  const auto& pool = pool::global_pool();
  if (!pool) return pool.error();
  return pool::last_allocation_error();
}

bool pool_find(const void* pointer, PoolLocation& location) noexcept {
  pool::Arena* arena = pool::arena_map_find(pointer);
  if (arena == nullptr || pool::inherited_by_fork(arena->owner->id())) return false;
  location.arena_base = arena->mapping.base;
  location.arena_length = arena->mapping.length;
  location.arena_fd = arena->mapping.fd;
  location.offset = static_cast<std::size_t>(static_cast<const std::byte*>(pointer) - arena->mapping.base);
  pool::Span* span = pool::span_map_find(pointer);
  bool at_start = span != nullptr && span->contains(pointer) && span->object_index(pointer) >= 0;
  location.usable_bytes = !at_start ? 0 : span->size_class == pool::kNotAClass ? span->bytes : span->object_bytes;
  location.registrations = arena->registrations.data();
  location.registered_mask = arena->registered_mask.load(std::memory_order_acquire);
  return true;
}

Expected<int> pool_add_registrar(Registrar& registrar, Access access) {
  const auto& pool = pool::global_pool();
  if (!pool) return tl::unexpected(pool.error());
  return (*pool)->add_registrar(registrar, access);
}

void pool_remove_registrar(int slot) noexcept {
  const auto& pool = pool::global_pool();
  if (pool) (*pool)->remove_registrar(slot);
}

PoolStats pool_stats() {
  const auto& pool = pool::global_pool();
  if (!pool) return {};
  return (*pool)->stats();
}

}  // namespace tether
