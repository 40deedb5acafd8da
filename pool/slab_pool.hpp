// SlabPool: size-class slabs and large buffers carved from pinned arenas, with
// per-thread caches. Pools live until the process exits (arenas are never unmapped).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "pool/arena.hpp"
#include "pool/size_classes.hpp"
#include "runtime/base/config.hpp"
#include "tether/pool.hpp"

namespace tether::pool {

inline constexpr int kMaxPools = 64;
inline constexpr int kPinningSlot = 0;  // slot of the registrar that pins the arenas

struct PoolOptions {
  std::size_t initial_bytes = std::size_t{32} << 20;
  std::size_t max_bytes = std::size_t{4} << 30;
  std::size_t arena_bytes = std::size_t{8} << 20;
  std::size_t thread_cache_bytes = std::size_t{1} << 20;
  Backing backing = Backing::memfd;
  // Pins the arenas (slot 0). nullptr: the built-in mlock registrar.
  Registrar* pinning_registrar = nullptr;

  // Reads the TETHER_POOL_* options; "auto" sizes follow RLIMIT_MEMLOCK.
  static Expected<PoolOptions> from_config(const config::Config& config);
};

// One slab or one large buffer. Metadata lives outside the pinned memory.
struct Span {
  std::byte* start = nullptr;
  std::size_t bytes = 0;
  Arena* arena = nullptr;
  SlabPool* owner = nullptr;
  int size_class = kNotAClass;          // kNotAClass: a large buffer
  std::uint32_t object_bytes = 0;
  std::uint32_t object_count = 0;
  std::uint8_t index_shift = 0;   // object index = (offset >> index_shift) [/ 3 when thirds]
  bool thirds = false;
  std::uint32_t state_stride = 1;  // bytes between two objects' states (64: no false sharing)
  std::unique_ptr<std::atomic<std::uint8_t>[]> states;  // kFree or kLive per object

  static constexpr std::uint8_t kFree = 0;
  static constexpr std::uint8_t kLive = 1;

  [[nodiscard]] bool contains(const void* pointer) const noexcept {
    auto* byte = static_cast<const std::byte*>(pointer);
    std::size_t used = size_class == kNotAClass ? bytes : std::size_t{object_bytes} * object_count;
    return byte >= start && byte < start + used;
  }
  [[nodiscard]] std::atomic<std::uint8_t>& state(std::size_t index) const noexcept {
    return states[index * state_stride];
  }
  // Index of the object starting at `pointer`, or -1 for an interior pointer.
  [[nodiscard]] std::int64_t object_index(const void* pointer) const noexcept {
    auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(pointer) - start);
    if (size_class == kNotAClass) return offset == 0 ? 0 : -1;
    if (offset & ((std::size_t{1} << index_shift) - 1)) return -1;
    std::size_t scaled = offset >> index_shift;
    if (thirds && scaled % 3 != 0) return -1;
    return static_cast<std::int64_t>(thirds ? scaled / 3 : scaled);
  }
};

// Intrusive list of free objects: word 0 links to the next, word 1 points at the
// object's state byte so that allocation needs no lookup.
struct FreeList {
  void* head = nullptr;
  std::atomic<std::uint32_t> count{0};  // written by the owner, read by pool_stats()
};

struct ThreadCache;

class SlabPool {
 public:
  // Maps and pins options.initial_bytes now. The pool is never destroyed.
  static Expected<SlabPool*> create(const PoolOptions& options);

  [[nodiscard]] void* allocate(std::size_t size, std::size_t alignment) noexcept;
  [[nodiscard]] Expected<void*> try_allocate(std::size_t size, std::size_t alignment);
  // Errc::ok, or not_from_pool / invalid_argument (interior) / double_free, logged.
  [[nodiscard]] Errc deallocate(void* pointer) noexcept;
  // deallocate() once the pointer's span (one of this pool's) is known.
  [[nodiscard]] Errc release(Span* span, void* pointer) noexcept;
  // release() for a pointer known to lie inside a slab span's objects.
  [[nodiscard]] Errc free_small(Span* span, void* pointer) noexcept;

  [[nodiscard]] Expected<int> add_registrar(Registrar& registrar, Access access);
  void remove_registrar(int slot) noexcept;
  [[nodiscard]] PoolStats stats() const;
  [[nodiscard]] const PoolOptions& options() const noexcept { return options_; }
  [[nodiscard]] int id() const noexcept { return id_; }  // index of its thread caches

  // Used by the thread caches.
  void refill(FreeList& list, int size_class, std::uint32_t want) noexcept;
  void drain(FreeList& list, int size_class, std::uint32_t keep) noexcept;
  void adopt_thread_cache(ThreadCache* cache) noexcept;
  void retire_thread_cache(ThreadCache* cache) noexcept;
  [[nodiscard]] std::uint32_t cache_limit(int size_class) const noexcept {
    return cache_limits_[size_class];
  }

 private:
  explicit SlabPool(const PoolOptions& options, int id);

  Expected<void*> allocate_small(int size_class);
  Expected<void*> allocate_large(std::size_t size, std::size_t alignment);
  Errc free_large(Span* span, void* pointer) noexcept;
  [[gnu::noinline]] Errc free_without_cache(int size_class, void* pointer) noexcept;
  Span* take_cached_large(std::size_t bytes, std::size_t alignment) noexcept;
  bool cache_large(Span* span) noexcept;
  [[gnu::cold, gnu::noinline]] Errc refuse_free(Errc code, const void* pointer, std::string_view why) noexcept;

  Expected<Span*> carve_span(std::size_t bytes, std::size_t alignment, int size_class);
  Span* carve_from_arenas(std::size_t blocks, std::size_t alignment_blocks, int size_class) noexcept;
  Span* new_span(int size_class) noexcept;
  Expected<Arena*> grow(std::size_t at_least_bytes);
  Expected<void> register_arena(Arena& arena, int slot, Registrar& registrar, Access access);
  void release_large_run(Span* span) noexcept;
  void release_large_run_locked(Span* span) noexcept;  // the caller holds growth_mutex_
  // Cached free large buffers go back to their arenas (the caller holds growth_mutex_);
  // false when there were none.
  bool return_cached_large_locked() noexcept;
  bool refill_central(int size_class) noexcept;

  struct CentralList {
    std::mutex mutex;
    FreeList list;
  };
  struct RegistrarSlot {
    Registrar* registrar = nullptr;
    Access access = Access::all;
  };

  PoolOptions options_;
  int id_;
  std::array<std::uint32_t, kClassCount> cache_limits_{};
  mutable std::array<CentralList, kClassCount> central_;

  mutable std::mutex growth_mutex_;  // arenas_, registrars_, byte totals
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::vector<Span*> spare_large_spans_;  // released large spans, reused, never deleted
  std::array<RegistrarSlot, kMaxRegistrars> registrars_{};
  std::atomic<std::uint64_t> bytes_mapped_{0};
  std::atomic<std::uint64_t> bytes_carved_{0};
  std::atomic<std::uint64_t> high_water_{0};
  std::atomic<std::uint64_t> registrations_{0};
  std::atomic<std::uint64_t> deregistrations_{0};
  std::atomic<std::uint64_t> bad_frees_{0};
  std::atomic<std::uint64_t> large_allocations_{0};
  std::atomic<std::uint64_t> large_frees_{0};
  std::array<std::atomic<std::uint64_t>, kClassCount> objects_carved_{};

  std::mutex large_mutex_;  // cached large buffers by block count
  std::multimap<std::size_t, Span*> large_cache_;
  std::size_t large_cache_bytes_ = 0;

  mutable std::mutex caches_mutex_;  // live thread caches
  std::vector<ThreadCache*> caches_;

  friend struct ThreadCache;
};

// The process-wide pool behind pinned_alloc, created from the environment on first use.
const Expected<SlabPool*>& global_pool();
// This thread's last allocation failure.
const Error& last_allocation_error() noexcept;
// In a child of fork(), true for the pools its parent had: their arenas stayed with the
// parent (MADV_DONTFORK), so allocations fail naming fork() and frees and lookups are
// ignored. Pools the child creates itself work.
[[nodiscard]] bool inherited_by_fork(int pool_id) noexcept;

}  // namespace tether::pool
