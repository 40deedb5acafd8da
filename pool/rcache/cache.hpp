// The registration cache's private parts: entries, the page-table index, the miss path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <vector>

#include "pool/rcache/page_table.hpp"
#include "tether/rcache.hpp"

namespace tether::rcache {

// Entry::state: the reference count in the low 32 bits and two flags.
inline constexpr std::uint64_t kRefMask = 0xffffffffULL;
inline constexpr std::uint64_t kInvalid = 1ULL << 32;  // out of the index; dies at last release
inline constexpr std::uint64_t kDead = 1ULL << 33;     // claimed for deregistration

inline constexpr std::size_t kPageBytes = 4096;

// One cache line: what the hit path touches. The registrations live in a block of their
// own (registrations_per_entry of them), so 100,000 entries stay cache-friendly.
struct alignas(64) Entry {
  std::uintptr_t start = 0;  // page-aligned; [start, end) never crosses a chunk boundary
  std::uintptr_t end = 0;
  std::atomic<std::uint64_t> state{kInvalid | kDead};
  std::atomic<std::uint64_t> last_used{0};
  std::atomic<std::uint64_t> hits{0};  // racy count (relaxed load + store): no locked op
  Registration* registrations = nullptr;
  Entry* next_retired = nullptr;
  Access access = Access::all;
  std::uint8_t fork_shared = 0;  // kSharedHead/kSharedTail: edge page not DONTFORK
  [[nodiscard]] std::size_t length() const noexcept { return end - start; }
};
static_assert(sizeof(Entry) == 64);
static_assert(std::is_trivially_destructible_v<Entry>);  // entries live in HugeChunks
inline constexpr std::uint8_t kSharedHead = 1;
inline constexpr std::uint8_t kSharedTail = 2;

class SpinLock {
 public:
  void lock() noexcept;
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Marks the calling thread as inside the cache, so a memory hook firing on it (an
// allocator unmapping from inside our own allocation) queues its range instead of
// taking a lock this thread holds.
class CriticalSection {
 public:
  CriticalSection() noexcept;
  ~CriticalSection();
  CriticalSection(const CriticalSection&) = delete;
  CriticalSection& operator=(const CriticalSection&) = delete;
  static bool active() noexcept;
};

// Marks the calling thread as holding the miss mutex (so a release on it does not try to
// take the mutex again).
class MissPath {
 public:
  MissPath() noexcept;
  ~MissPath();
  MissPath(const MissPath&) = delete;
  MissPath& operator=(const MissPath&) = delete;
  static bool held() noexcept;
};

struct Interval {
  std::uintptr_t start;
  std::uintptr_t end;
};

struct PendingRange {
  std::uintptr_t start;
  std::uintptr_t end;
};

class Cache {
 public:
  Cache(std::span<Registrar* const> registrars, RcacheOptions options);
  ~Cache();

  Expected<RcacheHandle> acquire(const void* address, std::size_t length, Access access);
  void release(Entry* entry) noexcept;
  void invalidate(std::uintptr_t start, std::uintptr_t end) noexcept;
  void flush() noexcept;
  RcacheStats stats() const noexcept;

  // fork(): idle entries' DONTFORK pages go to the child too (freed heap memory may hold
  // other objects by now); entries in use stay out of it.
  void prepare_fork() noexcept;
  void after_fork_in_parent() noexcept;
  void after_fork_in_child() noexcept;

 private:
  // Hit path (registration_cache.cpp).
  Entry* take_hit(std::uintptr_t address, Access access) noexcept;
  void drain_pending() noexcept;

  // Miss path (rcache_miss.cpp).
  // [request_start, request_end): the caller's bytes, not page-aligned.
  Expected<Entry*> take_or_register(std::uintptr_t address, std::uintptr_t end, Access access,
                                    std::uintptr_t request_start, std::uintptr_t request_end);
  std::uintptr_t gap_end(std::uintptr_t address, std::uintptr_t end) const noexcept;
  Expected<Entry*> register_entry(std::uintptr_t start, std::uintptr_t end, Access access);
  Entry* new_entry(std::uintptr_t start, std::uintptr_t end, Access access);
  static void exclude_from_fork(Entry& entry, std::uintptr_t request_start, std::uintptr_t request_end);
  static Interval dontfork_range(const Entry& entry) noexcept;
  Expected<void> make_room(std::size_t bytes);
  Expected<void> register_with_all(Entry& entry);
  bool recover_already_registered(std::uintptr_t start);
  std::size_t evict_idle(std::size_t count_wanted, std::size_t bytes_wanted);
  void publish(Entry* entry);

  // Retirement and invalidation (rcache_retire.cpp).
  void retire(Entry* entry) noexcept;
  void push_retired(Entry* entry) noexcept;
  void drain_retired() noexcept;
  void destroy(std::span<Entry* const> victims) noexcept;
  void unlink(Entry* entry) noexcept;
  std::vector<Interval> released_runs(std::span<Entry* const> victims) const;
  void deregister_pages(const Entry& entry, std::size_t slot) noexcept;
  void remove_from_index(Entry* entry) noexcept;
  void invalidate_now(std::uintptr_t start, std::uintptr_t end) noexcept;
  void invalidate_entry(Entry* entry) noexcept;
  void queue_pending(std::uintptr_t start, std::uintptr_t end) noexcept;

  std::vector<Registrar*> registrars_;
  RcacheOptions options_;
  PageTable table_;

  std::mutex miss_mutex_;                       // the miss path, eviction, deregistration
  std::multimap<std::uintptr_t, Entry*> registered_;  // every registered entry, by start
  std::size_t held_count_ = 0;
  std::size_t held_bytes_ = 0;
  std::atomic<Entry*> retired_{nullptr};        // lock-free stack of entries to deregister
  std::vector<Entry*> spare_entries_;           // recycled: entries are never freed while in use
  HugeChunks entry_memory_;                                          // entries, kEntriesPerBlock at a time
  std::vector<std::unique_ptr<Registration[]>> registration_blocks_;  // and their registrations
  static constexpr std::size_t kEntriesPerBlock = 256;
  std::uint64_t retired_hits_ = 0;
  std::vector<Interval> fork_runs_;             // made forkable for the duration of a fork()
  alignas(64) std::atomic<std::uint64_t> clock_{1};  // read on every release: own line
  alignas(64) char clock_padding_[1] = {};

  SpinLock pending_lock_;
  static constexpr std::size_t kPendingSlots = 256;
  PendingRange pending_[kPendingSlots] = {};
  std::size_t pending_used_ = 0;
  std::atomic<bool> pending_overflow_{false};
  std::atomic<std::size_t> pending_count_{0};

  std::atomic<std::uint64_t> misses_{0}, registrations_{0}, registered_bytes_{0},
      deregistrations_{0}, evictions_{0}, invalidations_{0}, uncached_{0}, pool_hits_{0};
  std::atomic<std::uint64_t> stat_entries_{0}, stat_bytes_{0};
};

// The memory monitor (monitor.cpp): every attached cache hears of unmapped ranges.
void monitor_attach(Cache* cache) noexcept;
void monitor_detach(Cache* cache) noexcept;
void monitor_notify(const void* address, std::size_t length) noexcept;

// Whether every page of [start, end) can be read (no PROT_NONE page, no hole).
bool pages_readable(std::uintptr_t start, std::uintptr_t end) noexcept;

}  // namespace tether::rcache
