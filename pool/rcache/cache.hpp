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
#include "pool/rcache/watch_counts.hpp"
#include "tether/rcache.hpp"

namespace tether::rcache {

inline constexpr std::size_t kPageBytes = 4096;

// Entry::state: a generation in the low 32 bits (advanced each time the entry is reused, so
// a claim prepared for one use of the entry cannot land on the next) and flags above.
// References are counted apart, per thread (below).
inline constexpr std::uint64_t kGeneration = 0xffffffffULL;
inline constexpr std::uint64_t kInvalid = 1ULL << 32;   // out of the index; dies at last release
inline constexpr std::uint64_t kDead = 1ULL << 33;      // claimed for deregistration
inline constexpr std::uint64_t kEvicting = 1ULL << 34;  // references being counted by eviction
inline constexpr std::uint64_t kFlags = kInvalid | kDead | kEvicting;  // any: no new reference
// The state a claim leaves: dead, in the same generation.
[[nodiscard]] inline constexpr std::uint64_t claimed_state(std::uint64_t state) noexcept {
  return (state & kGeneration) | kInvalid | kDead;
}

// References: a thread counts the ones it takes and drops in its own row (its own cache
// lines), so two threads hitting the same entries never write a shared line. A handle
// released on another thread leaves -1 in that thread's row: only the sum over rows
// means anything. Taking a reference is "add to my row, then read the flags"; claiming an
// entry is "set a flag, fence_against_references(), then sum the rows", so either the
// taker sees the flag or the claimer sees the reference. A thread owning its row adds
// with a plain load and store (the claimer's membarrier fences it); threads beyond
// kRefSlots - 1, or any thread where membarrier is missing, share the last row and add
// with a locked instruction (ref_slots.cpp).
inline constexpr std::size_t kRefSlots = 16;
inline constexpr std::size_t kEntriesPerBlock = 256;
// Unsigned, wrapping: a row where one thread only takes and another only drops counts past
// 2^32; the sum is taken modulo 2^32 too, and what is held at once never comes near it.
using RefCount = std::atomic<std::uint32_t>;
inline constexpr std::size_t kNoRefSlot = ~std::size_t{0};
struct RefSlot {
  std::size_t offset = kNoRefSlot;  // row * kEntriesPerBlock
  // The last row is shared: its adds are locked instructions.
  [[nodiscard]] constexpr bool shared() const noexcept { return offset == (kRefSlots - 1) * kEntriesPerBlock; }
};
inline constexpr RefSlot kSharedRefSlot{(kRefSlots - 1) * kEntriesPerBlock};
extern constinit __attribute__((tls_model("initial-exec"))) thread_local RefSlot t_ref_slot;
RefSlot assign_ref_slot() noexcept;
void fence_against_references() noexcept;

// One cache line: what the hit path touches. The registrations live in a block of their
// own (registrations_per_entry of them), so 100,000 entries stay cache-friendly.
struct alignas(64) Entry {
  std::uintptr_t start = 0;  // page-aligned; [start, end) never crosses a chunk boundary
  std::uintptr_t end = 0;
  std::atomic<std::uint64_t> state{kInvalid | kDead};
  std::atomic<std::uint64_t> last_used{0};
  Registration* registrations = nullptr;
  Entry* next_retired = nullptr;
  Access access = Access::all;
  std::uint8_t fork_shared = 0;  // kSharedHead/kSharedTail: edge page not DONTFORK
  bool watch_counted = false;    // holds a count in the userfaultfd's watches
  [[nodiscard]] std::size_t length() const noexcept { return end - start; }
};
static_assert(sizeof(Entry) == 64);
static_assert(std::is_trivially_destructible_v<Entry>);  // entries live in HugeChunks

// Entries come in blocks: 256 entries, then their reference counts, one row of 256 per
// slot. A count's address follows from its entry's, so the hit path can fetch both lines
// at once.
inline constexpr std::size_t kEntryRowsBytes = kEntriesPerBlock * sizeof(Entry);
inline constexpr std::size_t kEntryBlockBytes = 2 * kEntryRowsBytes;
static_assert(kRefSlots * kEntriesPerBlock * sizeof(RefCount) == kEntryRowsBytes);

inline RefCount* ref_column(const Entry& entry) noexcept {
  auto address = reinterpret_cast<std::uintptr_t>(&entry);
  std::uintptr_t block = address & ~(kEntryBlockBytes - 1);
  return reinterpret_cast<RefCount*>(block + kEntryRowsBytes) + (address - block) / sizeof(Entry);
}

// add_ref() for a thread that has its slot already (acquire assigns it before the hit path,
// which then makes no call).
inline void add_ref_in(RefSlot slot, const Entry& entry, std::uint32_t delta) noexcept {
  RefCount& count = ref_column(entry)[slot.offset];
  if (slot.shared()) {
    count.fetch_add(delta);  // a full fence too
    return;
  }
  count.store(count.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the flags are read after the add
}

inline RefSlot ref_slot() noexcept {
  RefSlot slot = t_ref_slot;
  if (slot.offset == kNoRefSlot) [[unlikely]]
    slot = assign_ref_slot();
  return slot;
}

// Memory hooks must not allocate: a thread without a row yet uses the shared one rather
// than being given one (which registers a thread-exit destructor).
inline RefSlot ref_slot_in_hook() noexcept {
  RefSlot slot = t_ref_slot;
  return slot.offset == kNoRefSlot ? kSharedRefSlot : slot;
}

inline constexpr std::uint32_t kTake = 1;
inline constexpr std::uint32_t kDrop = ~std::uint32_t{0};  // -1, wrapping

inline void add_ref(const Entry& entry, std::uint32_t delta) noexcept { add_ref_in(ref_slot(), entry, delta); }

// Sum over rows, modulo 2^32 (see RefCount); a caller that did not just set a flag fences first.
inline std::uint32_t total_refs(const Entry& entry) noexcept {
  RefCount* column = ref_column(entry);
  std::uint32_t sum = 0;
  for (std::size_t slot = 0; slot < kRefSlots; ++slot) sum += column[slot * kEntriesPerBlock].load();
  return sum;
}

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

using Interval = WatchCounts::Range;  // [start, end)

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
  // The RegistrationCache went while handles still hold entries: their registrations stay
  // for good, and nothing is deregistered any more (the registrars may be gone); pages of
  // entries it drops still go back to fork().
  void abandon() noexcept;
  RcacheStats stats() const noexcept;

  // fork(): idle entries' DONTFORK pages go to the child too (freed heap memory may hold
  // other objects by now); entries in use stay out of it.
  void prepare_fork() noexcept;
  void after_fork_in_parent() noexcept;
  void after_fork_in_child() noexcept;

 private:
  // Hit path (registration_cache.cpp).
  Entry* take_hit(std::uintptr_t address, Access access) noexcept;
  Expected<void> acquire_rest(RcacheHandle& handle, Entry* entry, std::uintptr_t cursor, std::uintptr_t end,
                              Access access, std::uintptr_t request_start, std::size_t length);
  [[gnu::noinline, gnu::cold]] Entry* back_off(Entry* entry) noexcept;
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
  void retire_covered_by(const Entry& entry) noexcept;

  // References, retirement and invalidation (rcache_retire.cpp).
  void drop_reference(Entry* entry) noexcept;
  bool drop_and_claim(Entry* entry, RefSlot slot) noexcept;
  bool claim_after_drop(Entry* entry, RefSlot slot) noexcept;
  bool claim_if_unreferenced(Entry* entry) noexcept;
  bool claim_if_idle(Entry* entry) noexcept;  // miss_mutex_ held
  static bool claim(Entry* entry, std::uint64_t state) noexcept;
  struct Marked {
    bool marked;   // this call made it invalid (false: it was already)
    bool claimed;  // and this call's drop claimed it: the caller queues it
  };
  Marked mark_invalid(Entry* entry, RefSlot slot) noexcept;
  void retire(Entry* entry) noexcept;
  void push_retired(Entry* entry) noexcept;
  void drain_retired() noexcept;
  void deregister(std::span<Entry* const> victims, std::span<const Interval> runs) noexcept;
  void destroy(std::span<Entry* const> victims) noexcept;
  void unlink(Entry* entry) noexcept;
  std::vector<Interval> released_runs(std::span<Entry* const> victims) const;
  static void unwatch(std::span<Entry* const> victims) noexcept;
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
  bool abandoned_ = false;  // under miss_mutex_, as every drain is
  std::vector<Entry*> spare_entries_;           // recycled: entries are never freed while in use
  HugeChunks entry_memory_;  // blocks of kEntriesPerBlock entries and their counts, kEntryBlockBytes apart
  std::vector<std::unique_ptr<Registration[]>> registration_blocks_;  // and their registrations
  std::vector<Interval> fork_runs_;             // made forkable for the duration of a fork()
  alignas(64) std::atomic<std::uint64_t> clock_{1};  // read on every release: own line
  alignas(64) char clock_padding_[1] = {};
  struct alignas(64) HitCount {
    std::atomic<std::uint64_t> value{0};  // racy (relaxed load + store) where threads share a slot
  };
  HitCount hits_[kRefSlots];

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
