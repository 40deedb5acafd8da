// SlabPool set-up: options, arenas, registrars and statistics.
#include "pool/slab_pool.hpp"

#include <pthread.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "pool/memlock.hpp"
#include "pool/mlock_registrar.hpp"
#include "pool/thread_cache.hpp"
#include "runtime/base/log.hpp"

namespace tether::pool {
namespace {

constexpr std::size_t kAutoInitialBytes = std::size_t{32} << 20;
constexpr std::size_t kAutoMaxBytes = std::size_t{4} << 30;
constexpr std::size_t kLargestInitialBytes = std::size_t{1} << 40;  // 1T: also keeps round_up from wrapping
std::atomic<int> g_next_pool_id{0};

std::size_t round_up(std::size_t bytes, std::size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}
std::size_t round_down(std::size_t bytes, std::size_t unit) { return bytes / unit * unit; }

std::size_t auto_initial_bytes(const MemlockLimit& limit) {
  if (limit.unlimited()) return kAutoInitialBytes;
  return std::max(kArenaAlignment, round_down(std::min<std::uint64_t>(kAutoInitialBytes, limit.available() / 2),
                                              kArenaAlignment));
}

std::size_t auto_max_bytes(const MemlockLimit& limit, std::size_t initial) {
  if (limit.unlimited()) return std::max(kAutoMaxBytes, initial);
  return std::max(initial, round_down(std::min<std::uint64_t>(kAutoMaxBytes, limit.available()),
                                      kArenaAlignment));
}

Expected<void> check_options(const PoolOptions& options) {
  if (options.initial_bytes > options.max_bytes)
    return make_error(Errc::config,
                      fmt::format("TETHER_POOL_SIZE ({}) is larger than TETHER_POOL_MAX ({})",
                                  config::format_size(options.initial_bytes),
                                  config::format_size(options.max_bytes)),
                      "raise TETHER_POOL_MAX or lower TETHER_POOL_SIZE");
  if (options.arena_bytes == 0)
    return make_error(Errc::config, "TETHER_POOL_ARENA_SIZE is 0", "use a size of at least 2M");
  return {};
}

Expected<void> check_memlock(std::size_t bytes) {
  MemlockLimit limit = read_memlock_limit();
  if (limit.available() >= bytes) return {};
  return make_error(Errc::memlock_limit,
                    fmt::format("TETHER_POOL_SIZE asks to pin {} at start-up but {}",
                                config::format_size(bytes), limit.describe()),
                    fmt::format("raise the limit (ulimit -l unlimited) or set TETHER_POOL_SIZE to at "
                                "most {}",
                                config::format_size(round_down(limit.available(), kArenaAlignment))));
}

}  // namespace

namespace {
std::atomic<int> g_first_own_pool_id{0};  // pools with smaller ids belong to a parent process

// In the child of fork(): only the forking thread lives on, and its caches hold pointers
// into the parent's arenas, which the child does not map. They are dropped unread.
void forget_parent_pools() noexcept {
  g_first_own_pool_id.store(g_next_pool_id.load(std::memory_order_relaxed), std::memory_order_relaxed);
  t_thread_caches.fill(nullptr);
  t_global_pool_cache = &g_no_thread_cache;
  t_recent_span = RecentSpan{};
}
const bool g_fork_handler = ::pthread_atfork(nullptr, nullptr, forget_parent_pools) == 0;
}  // namespace

bool inherited_by_fork(int pool_id) noexcept { return pool_id < g_first_own_pool_id.load(std::memory_order_relaxed); }

Expected<PoolOptions> PoolOptions::from_config(const config::Config& config) {
  MemlockLimit limit = read_memlock_limit();
  PoolOptions options;
  std::size_t initial = config.size_bytes("TETHER_POOL_SIZE");
  std::size_t max = config.size_bytes("TETHER_POOL_MAX");
  if (initial > kLargestInitialBytes)
    return make_error(Errc::config,
                      fmt::format("TETHER_POOL_SIZE={} is more than the {} a pool may pin at start-up",
                                  config::format_size(initial), config::format_size(kLargestInitialBytes)),
                      "give a smaller size, or auto; TETHER_POOL_MAX bounds the growth");
  if (max != 0 && max < kArenaAlignment)
    return make_error(Errc::config,
                      fmt::format("TETHER_POOL_MAX={} is less than one arena (2M)", config::format_size(max)),
                      "give at least 2M");
  options.initial_bytes = initial == 0 ? auto_initial_bytes(limit) : round_up(initial, kArenaAlignment);
  if (initial == 0 && max != 0)  // an automatic start-up size never passes a maximum set by hand
    options.initial_bytes = std::min(options.initial_bytes, round_down(max, kArenaAlignment));
  options.max_bytes = max == 0 ? auto_max_bytes(limit, options.initial_bytes) : max;
  options.arena_bytes = round_up(config.size_bytes("TETHER_POOL_ARENA_SIZE"), kArenaAlignment);
  options.thread_cache_bytes = config.size_bytes("TETHER_POOL_THREAD_CACHE");
  auto backing = choose_backing(config.choice("TETHER_POOL_BACKING"), options.initial_bytes);
  if (!backing) return tl::unexpected(backing.error());
  options.backing = *backing;
  auto valid = check_options(options);
  if (!valid) return tl::unexpected(valid.error());
  return options;
}

SlabPool::SlabPool(const PoolOptions& options, int id) : options_(options), id_(id) {
  for (int c = 0; c < kClassCount; ++c) {
    std::size_t limit = options.thread_cache_bytes / (4 * class_bytes(c));
    cache_limits_[c] = static_cast<std::uint32_t>(std::clamp<std::size_t>(limit, 2, 512));
  }
  registrars_[kPinningSlot].registrar =
      options.pinning_registrar != nullptr ? options.pinning_registrar : &mlock_registrar();
}

Expected<SlabPool*> SlabPool::create(const PoolOptions& options) {
  auto valid = check_options(options);
  if (!valid) return tl::unexpected(valid.error());
  auto pinnable = check_memlock(options.initial_bytes);
  if (!pinnable) return tl::unexpected(pinnable.error());
  int id = g_next_pool_id.fetch_add(1);
  if (id >= kMaxPools)
    return make_error(Errc::limit_exceeded, fmt::format("{} pools exist already", kMaxPools),
                      "use the process-wide pool (pinned_alloc) instead of creating pools");
  auto* pool = new SlabPool(options, id);
  if (options.initial_bytes > 0) {
    std::lock_guard lock(pool->growth_mutex_);
    auto arena = pool->grow(options.initial_bytes);
    if (!arena) return tl::unexpected(arena.error());  // the pool object is left unused
  }
  log::info("pool", "pool {} pinned {} in {} arenas ({} backing), may grow to {}", id,
            config::format_size(options.initial_bytes), pool->arenas_.size(),
            backing_name(options.backing), config::format_size(options.max_bytes));
  return pool;
}

Expected<Arena*> SlabPool::grow(std::size_t at_least_bytes) {
  std::size_t length = round_up(std::max(at_least_bytes, std::min(options_.arena_bytes, options_.max_bytes)),
                                kArenaAlignment);
  std::uint64_t mapped = bytes_mapped_.load();
  if (mapped + length > options_.max_bytes)
    return make_error(Errc::limit_exceeded,
                      fmt::format("the pool needs {} more but has {} of TETHER_POOL_MAX={} pinned",
                                  config::format_size(length), config::format_size(mapped),
                                  config::format_size(options_.max_bytes)),
                      "raise TETHER_POOL_MAX (and ulimit -l), or free pool buffers sooner");
  auto mapping = map_arena(length, options_.backing);
  if (!mapping) return tl::unexpected(mapping.error());
  auto arena = std::make_unique<Arena>(*mapping, this, static_cast<std::uint32_t>(arenas_.size()));
  for (int slot = 0; slot < kMaxRegistrars; ++slot) {
    if (registrars_[slot].registrar == nullptr) continue;
    auto registered = register_arena(*arena, slot, *registrars_[slot].registrar, registrars_[slot].access);
    if (registered) continue;
    for (int done = 0; done < slot; ++done)
      if (arena->registered_mask.load() & (1U << done))
        registrars_[done].registrar->deregister(arena->registrations[done]);
    ::munmap(mapping->base, mapping->length);
    if (mapping->fd >= 0) ::close(mapping->fd);
    return tl::unexpected(registered.error());
  }
  arena_map_insert(arena.get());
  bytes_mapped_ += length;
  arenas_.push_back(std::move(arena));
  return arenas_.back().get();
}

Expected<void> SlabPool::register_arena(Arena& arena, int slot, Registrar& registrar, Access access) {
  auto registration = registrar.register_range(arena.mapping.base, arena.mapping.length, access);
  if (!registration) {
    Error error = registration.error();
    if (slot == kPinningSlot && error.code == Errc::memlock_limit)
      error.remedy = "raise the limit (ulimit -l unlimited) or lower TETHER_POOL_SIZE / TETHER_POOL_MAX";
    return tl::unexpected(std::move(error));
  }
  arena.registrations[slot] = *registration;
  arena.registered_mask.fetch_or(1U << slot);
  ++registrations_;
  return {};
}

Expected<int> SlabPool::add_registrar(Registrar& registrar, Access access) {
  std::lock_guard lock(growth_mutex_);
  int slot = 1;
  while (slot < kMaxRegistrars && registrars_[slot].registrar != nullptr) ++slot;
  if (slot == kMaxRegistrars)
    return make_error(Errc::limit_exceeded,
                      fmt::format("{} registrars are attached already", kMaxRegistrars - 1),
                      "remove a registrar (pool_remove_registrar) before adding another");
  for (auto& arena : arenas_) {
    auto registered = register_arena(*arena, slot, registrar, access);
    if (registered) continue;
    for (auto& undo : arenas_) {
      if (!(undo->registered_mask.fetch_and(~(1U << slot)) & (1U << slot))) continue;
      registrar.deregister(undo->registrations[slot]);
    }
    return tl::unexpected(registered.error());
  }
  registrars_[slot] = {&registrar, access};
  return slot;
}

void SlabPool::remove_registrar(int slot) noexcept {
  if (slot <= kPinningSlot || slot >= kMaxRegistrars) return;
  std::lock_guard lock(growth_mutex_);
  Registrar* registrar = registrars_[slot].registrar;
  if (registrar == nullptr) return;
  for (auto& arena : arenas_) {
    if (!(arena->registered_mask.fetch_and(~(1U << slot)) & (1U << slot))) continue;
    registrar->deregister(arena->registrations[slot]);
    arena->registrations[slot] = Registration{};
    ++deregistrations_;
  }
  registrars_[slot] = RegistrarSlot{};
}

PoolStats SlabPool::stats() const {
  PoolStats stats;
  {
    std::lock_guard lock(growth_mutex_);
    stats.arenas = arenas_.size();
    for (const auto& arena : arenas_)
      if (arena->registered_mask.load() & (1U << kPinningSlot)) stats.bytes_pinned += arena->mapping.length;
  }
  stats.bytes_mapped = bytes_mapped_.load();
  stats.bytes_carved = bytes_carved_.load();
  stats.high_water_bytes = high_water_.load();
  stats.registrations = registrations_.load();
  stats.deregistrations = deregistrations_.load();
  stats.bad_frees = bad_frees_.load();
  stats.large_allocations = large_allocations_.load();
  stats.large_frees = large_frees_.load();
  {
    std::lock_guard lock(caches_mutex_);
    for (const ThreadCache* cache : caches_) {
      stats.large_allocations += cache->large_allocations.load(std::memory_order_relaxed);
      stats.large_frees += cache->large_frees.load(std::memory_order_relaxed);
    }
  }
  for (int c = 0; c < kClassCount; ++c) {
    std::uint64_t carved = objects_carved_[c].load();
    std::uint64_t free_objects = 0;
    {
      std::lock_guard central_lock(central_[c].mutex);
      free_objects += central_[c].list.count.load(std::memory_order_relaxed);
    }
    std::lock_guard lock(caches_mutex_);
    for (const ThreadCache* cache : caches_) free_objects += cache->lists[c].count.load(std::memory_order_relaxed);
    stats.classes.push_back({class_bytes(c), carved, carved > free_objects ? carved - free_objects : 0});
  }
  return stats;
}

void SlabPool::retire_thread_cache(ThreadCache* cache) noexcept {
  for (int c = 0; c < kClassCount; ++c) drain(cache->lists[c], c, 0);
  for (std::atomic<Span*>& slot : cache->large_spans) {
    Span* span = slot.exchange(nullptr, std::memory_order_acquire);
    if (span != nullptr && !cache_large(span)) release_large_run(span);
  }
  {
    std::lock_guard lock(caches_mutex_);
    std::erase(caches_, cache);
    large_allocations_ += cache->large_allocations.load(std::memory_order_relaxed);
    large_frees_ += cache->large_frees.load(std::memory_order_relaxed);
  }
  delete cache;
}

void SlabPool::adopt_thread_cache(ThreadCache* cache) noexcept {
  std::lock_guard lock(caches_mutex_);
  caches_.push_back(cache);
}

}  // namespace tether::pool
