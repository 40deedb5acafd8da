// The registration cache for user memory: acquire() returns a handle carrying every
// registrar's keys for a range covering the request; the second use of a buffer costs a
// lookup. Entries are invalidated when their memory is unmapped, so a handle never
// carries a registration of memory that was freed and mapped again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tether/error.hpp"
#include "tether/pool.hpp"

namespace tether {

namespace rcache {
struct Entry;
class Cache;
}  // namespace rcache

// What happens when a limit is reached and every entry is in use.
enum class RcacheOverLimit : std::uint8_t { register_uncached, fail };

struct RcacheOptions {
  std::size_t max_count = 0;        // entries registered at once (0: derived from the machine)
  std::size_t max_bytes = 0;        // bytes registered at once (0: derived from the machine)
  std::size_t chunk_bytes = 2u << 20;  // entries never cross a multiple of this (power of two)
  bool leave_pinned = true;         // keep idle entries registered until a limit needs room
  RcacheOverLimit over_limit = RcacheOverLimit::register_uncached;
  // Registrars whose registrations do not nest (mlock: one munlock undoes every mlock of
  // a page). The cache then never hands them a deregistration of a page that another
  // registration still holds. One flag per registrar; missing flags count as false.
  std::vector<bool> non_nesting;

  // From TETHER_RCACHE_* (machine-derived defaults resolved).
  static RcacheOptions from_config();
};

struct RcacheStats {
  std::uint64_t hits = 0;           // pieces served by a registered entry
  std::uint64_t misses = 0;         // pieces that needed a registration
  std::uint64_t registrations = 0;  // entries registered (each with every registrar)
  std::uint64_t registered_bytes_total = 0;  // sum of the lengths of those registrations
  std::uint64_t deregistrations = 0;
  std::uint64_t evictions = 0;      // idle entries deregistered to make room
  std::uint64_t invalidations = 0;  // entries dropped because their memory was unmapped
  std::uint64_t uncached = 0;       // registrations made outside the cache (over a limit)
  std::uint64_t pool_hits = 0;      // requests served by the pinned pool's registrations
  std::uint64_t entries_held = 0;   // registered now (in use, idle or awaiting release)
  std::uint64_t bytes_held = 0;
  std::uint64_t entries_in_use = 0; // held by at least one handle
};

// One registered piece of a handle's range: registrations[i] is registrar i's (for pool
// memory, pool slot i's; see RcacheHandle::from_pool()).
struct RcacheSegment {
  void* address = nullptr;
  std::size_t length = 0;
  const Registration* registrations = nullptr;
};

// Move-only; dropping it releases the range (no blocking, no throwing).
class RcacheHandle {
 public:
  RcacheHandle() noexcept = default;
  // Moves and an empty handle's release are inline: acquire hands a handle through an
  // Expected, and a hit costs tens of nanoseconds.
  RcacheHandle(RcacheHandle&& other) noexcept { steal(other); }
  RcacheHandle& operator=(RcacheHandle&& other) noexcept;
  RcacheHandle(const RcacheHandle&) = delete;
  RcacheHandle& operator=(const RcacheHandle&) = delete;
  ~RcacheHandle() { release(); }

  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t segment_count() const noexcept { return count_; }
  [[nodiscard]] RcacheSegment segment(std::size_t index) const noexcept;
  // The segment holding `address` (for a rendezvous chunk), or an empty segment.
  [[nodiscard]] RcacheSegment segment_at(const void* address) const noexcept;
  // True when the range lies in the pinned pool: registrations are the pool's, by slot.
  [[nodiscard]] bool from_pool() const noexcept { return pool_registrations_ != nullptr; }
  void release() noexcept {
    if (count_ != 0 || spill_ != nullptr) release_entries();
    pool_registrations_ = nullptr;
  }

 private:
  friend class rcache::Cache;
  static constexpr std::size_t kInline = 3;
  rcache::Entry** entries() noexcept { return spill_ ? spill_ : inline_; }
  rcache::Entry* const* entries() const noexcept { return spill_ ? spill_ : inline_; }
  void push(rcache::Entry* entry);
  void release_entries() noexcept;
  // Word by word: a handle is usually moved just after acquire() wrote it, and a 16-byte
  // load spanning two of those 8-byte stores cannot take its bytes from them (the move
  // stalled, 1.5x the whole hit at some stack alignments). The empty asm keeps the
  // compiler from pairing the loads.
  template <typename T>
  static void copy_word(T& to, const T& from) noexcept {
    static_assert(sizeof(T) <= sizeof(void*), "one register's worth at a time");
    T value = from;
    asm volatile("" : "+r"(value));
    to = value;
  }
  void steal(RcacheHandle& other) noexcept {
    copy_word(cache_, other.cache_);
    for (std::size_t i = 0; i < kInline; ++i) copy_word(inline_[i], other.inline_[i]);
    copy_word(spill_, other.spill_);
    copy_word(count_, other.count_);
    copy_word(capacity_, other.capacity_);
    copy_word(pool_registrations_, other.pool_registrations_);
    copy_word(pool_base_, other.pool_base_);
    copy_word(pool_length_, other.pool_length_);
    other.spill_ = nullptr;
    other.count_ = 0;
    other.capacity_ = kInline;
    other.pool_registrations_ = nullptr;
  }

  rcache::Cache* cache_ = nullptr;
  rcache::Entry* inline_[kInline] = {};
  rcache::Entry** spill_ = nullptr;
  std::size_t count_ = 0;
  std::size_t capacity_ = kInline;
  // Pool memory: one segment, the whole arena.
  const Registration* pool_registrations_ = nullptr;
  void* pool_base_ = nullptr;
  std::size_t pool_length_ = 0;
};

class RegistrationCache {
 public:
  // `registrars` are kept by pointer and must outlive the cache (at most kMaxRegistrars).
  static Expected<std::unique_ptr<RegistrationCache>> create(std::span<Registrar* const> registrars,
                                                             RcacheOptions options);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A handle covering [address, address + length): a hit takes references on registered
  // entries; a miss registers the missing pages, chunk by chunk.
  [[nodiscard]] Expected<RcacheHandle> acquire(const void* address, std::size_t length,
                                               Access access = Access::all);
  [[nodiscard]] RcacheStats stats() const noexcept;
  // Drops every entry overlapping the range (what the memory monitor calls; safe from
  // inside memory hooks: it allocates nothing and never waits for a registrar).
  void invalidate(const void* address, std::size_t length) noexcept;
  // Deregisters every idle entry now.
  void flush() noexcept;

 private:
  explicit RegistrationCache(std::unique_ptr<rcache::Cache> cache) noexcept;
  std::unique_ptr<rcache::Cache> cache_;
};

// The process's cache over the pool's mlock registrar, from the TETHER_RCACHE_* options,
// with the memory monitor chosen by TETHER_RCACHE_MONITOR.
[[nodiscard]] Expected<RegistrationCache*> rcache_global();
// Starts the memory monitor chosen by TETHER_RCACHE_MONITOR, once per process, so that
// caches made with create() see unmapped memory too.
[[nodiscard]] Expected<void> rcache_start_monitor();

}  // namespace tether
