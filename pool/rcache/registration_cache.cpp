// The hit path: page-align the request, look each page up in the page table, take a
// reference in this thread's row (cache.hpp) and check the entry still covers the page.
#include <immintrin.h>
#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"
#include "runtime/base/log.hpp"

namespace tether::rcache {
namespace {

// initial-exec: a plain %fs-relative access on the hit path, no __tls_get_addr call.
__attribute__((tls_model("initial-exec"))) thread_local int t_critical_depth = 0;

std::uintptr_t align_down(std::uintptr_t value) noexcept { return value & ~(kPageBytes - 1); }

// The request's end rounded up to a page, or 0 when the request is malformed (NULL, zero
// length, or running past the end of the address space): refuse_request says which.
std::uintptr_t page_end(const void* address, std::size_t length) noexcept {
  auto start = reinterpret_cast<std::uintptr_t>(address);
  constexpr auto kMax = std::numeric_limits<std::uintptr_t>::max();
  if (address == nullptr || length == 0 || length > kMax - start || start + length > kMax - kPageBytes) return 0;
  return (start + length + kPageBytes - 1) & ~(kPageBytes - 1);
}

[[gnu::cold, gnu::noinline]] Error refuse_request(const void* address, std::size_t length) {
  if (address == nullptr)
    return Error{Errc::invalid_argument, 0, "acquire() was given a NULL address", "pass the buffer that is sent or received"};
  if (length == 0)
    return Error{Errc::invalid_argument, 0, fmt::format("acquire({}, 0) asks for zero bytes", address),
                 "skip registration for empty messages"};
  return Error{Errc::invalid_argument, 0,
               fmt::format("acquire({}, {}) runs past the end of the address space", address, length),
               "pass the real length of the buffer"};
}

// The pool's arenas are DONTFORK: a forked child inherits the pool's map of them but not
// the memory, and may map other things there. The child must not trust pool_find.
std::atomic<bool> g_pool_memory_present{true};
void forget_pool_in_child() { g_pool_memory_present.store(false, std::memory_order_relaxed); }
const bool g_fork_handler = ::pthread_atfork(nullptr, nullptr, forget_pool_in_child) == 0;

bool from_pool(const void* address, std::size_t length, PoolLocation& location) {
  return g_pool_memory_present.load(std::memory_order_relaxed) && pool_find(address, location) &&
         location.offset + length <= location.arena_length;
}

}  // namespace

void SpinLock::lock() noexcept {
  while (locked_.exchange(true, std::memory_order_acquire)) {
    while (locked_.load(std::memory_order_relaxed)) _mm_pause();
  }
}

static __attribute__((tls_model("initial-exec"))) thread_local int t_miss_path_depth = 0;
MissPath::MissPath() noexcept { ++t_miss_path_depth; }
MissPath::~MissPath() { --t_miss_path_depth; }
bool MissPath::held() noexcept { return t_miss_path_depth > 0; }

CriticalSection::CriticalSection() noexcept { ++t_critical_depth; }
CriticalSection::~CriticalSection() { --t_critical_depth; }
bool CriticalSection::active() noexcept { return t_critical_depth > 0; }

Cache::Cache(std::span<Registrar* const> registrars, RcacheOptions options)
    : registrars_(registrars.begin(), registrars.end()), options_(std::move(options)) {
  options_.non_nesting.resize(registrars_.size(), false);
  monitor_attach(this);
}

Cache::~Cache() {
  monitor_detach(this);
  drain_pending();
  flush();
}


// Lock-free: the entry may be retired and recycled between the lookup and the reference,
// so after taking it the slot and the range are checked again.
Entry* Cache::take_hit(std::uintptr_t address, Access access) noexcept {
  Entry* entry = table_.find(address);
  if (entry == nullptr) return nullptr;
  __builtin_prefetch(entry);  // fetched alongside the count's line below
  RefSlot slot = t_ref_slot;  // assigned by acquire()
  add_ref_in(slot, *entry, kTake);
  auto wanted = static_cast<std::uint32_t>(access);
  bool usable = (entry->state.load() & kFlags) == 0 && entry->start <= address && address < entry->end &&
                (static_cast<std::uint32_t>(entry->access) & wanted) == wanted && table_.find(address) == entry;
  if (!usable) [[unlikely]]
    return back_off(entry);
  auto& hits = hits_[slot.offset / kEntriesPerBlock].value;
  hits.store(hits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return entry;
}

// The common case, one entry covering the whole request, returns from here; requests
// spanning entries, misses and errors go on in acquire_rest. Every return names `result`
// so the handle is built in place (moving a freshly written handle into an Expected
// stalled on store forwarding: half the hit's time).
Expected<RcacheHandle> Cache::acquire(const void* address, std::size_t length, Access access) {
  Expected<RcacheHandle> result{tl::in_place};
  std::uintptr_t end = page_end(address, length);
  if (end == 0) [[unlikely]] {
    result = tl::unexpected(refuse_request(address, length));
    return result;
  }
  if (uffd_running()) uffd_wait_idle();
  if (pending_count_.load(std::memory_order_acquire) != 0) drain_pending();
  static_cast<void>(ref_slot());  // take_hit's
  RcacheHandle& handle = *result;
  handle.cache_ = this;
  PoolLocation location;
  if (from_pool(address, length, location)) {
    pool_hits_.fetch_add(1, std::memory_order_relaxed);
    handle.pool_registrations_ = location.registrations;
    handle.pool_base_ = location.arena_base;
    handle.pool_length_ = location.arena_length;
    handle.count_ = 1;
    return result;
  }
  std::uintptr_t cursor = align_down(reinterpret_cast<std::uintptr_t>(address));
  Entry* entry = take_hit(cursor, access);
  if (entry != nullptr && entry->end >= end) [[likely]] {
    handle.inline_[0] = entry;
    handle.count_ = 1;
    return result;
  }
  auto rest = acquire_rest(handle, entry, cursor, end, access, reinterpret_cast<std::uintptr_t>(address), length);
  if (!rest) result = tl::unexpected(rest.error());
  return result;
}

// From `cursor` on (`entry`: the hit at `cursor`, if any), entry after entry to `end`.
Expected<void> Cache::acquire_rest(RcacheHandle& handle, Entry* entry, std::uintptr_t cursor, std::uintptr_t end,
                                   Access access, std::uintptr_t request_start, std::size_t length) {
  for (;;) {
    if (entry == nullptr) {
      auto registered = take_or_register(cursor, end, access, request_start, request_start + length);
      if (!registered) return tl::unexpected(registered.error());
      entry = *registered;
    }
    handle.push(entry);
    cursor = entry->end;
    if (cursor >= end) return {};
    entry = take_hit(cursor, access);
  }
}

// A reference taken on an entry that turned out dying, recycled or not covering: dropped
// out of line, so the hit path keeps no registers across a call.
Entry* Cache::back_off(Entry* entry) noexcept {
  drop_reference(entry);
  return nullptr;
}

// The LRU stamp is written only when it changed (a miss advances the clock), so hits on
// entries another thread also uses leave their line shared.
// Dropping a reference to a valid entry ends here; anything else goes on out of line.
void Cache::release(Entry* entry) noexcept {
  if (!options_.leave_pinned) return drop_reference(entry);
  std::uint64_t now = clock_.load(std::memory_order_relaxed);
  if (entry->last_used.load(std::memory_order_relaxed) != now) entry->last_used.store(now, std::memory_order_relaxed);
  RefSlot slot = ref_slot();
  add_ref_in(slot, *entry, kDrop);
  if ((entry->state.load() & kFlags) == 0) [[likely]]
    return;
  if (claim_after_drop(entry, slot)) retire(entry);
}

RcacheStats Cache::stats() const noexcept {
  if (uffd_running()) uffd_wait_idle();  // events already read are counted
  RcacheStats stats;
  stats.misses = misses_.load(std::memory_order_relaxed);
  stats.registrations = registrations_.load(std::memory_order_relaxed);
  stats.registered_bytes_total = registered_bytes_.load(std::memory_order_relaxed);
  stats.deregistrations = deregistrations_.load(std::memory_order_relaxed);
  stats.evictions = evictions_.load(std::memory_order_relaxed);
  stats.invalidations = invalidations_.load(std::memory_order_relaxed);
  stats.uncached = uncached_.load(std::memory_order_relaxed);
  stats.pool_hits = pool_hits_.load(std::memory_order_relaxed);
  stats.entries_held = stat_entries_.load(std::memory_order_relaxed);
  stats.bytes_held = stat_bytes_.load(std::memory_order_relaxed);
  auto* self = const_cast<Cache*>(this);
  std::lock_guard guard(self->miss_mutex_);
  for (const HitCount& count : hits_) stats.hits += count.value.load(std::memory_order_relaxed);
  for (const auto& [start, entry] : registered_) {
    if (total_refs(*entry) != 0) ++stats.entries_in_use;
  }
  return stats;
}

}  // namespace tether::rcache

namespace tether {

// --- RcacheHandle ---

RcacheHandle& RcacheHandle::operator=(RcacheHandle&& other) noexcept {
  if (this != &other) {
    release();
    steal(other);
  }
  return *this;
}

void RcacheHandle::push(rcache::Entry* entry) {
  if (count_ == capacity_) {
    std::size_t grown = capacity_ * 2;
    auto** bigger = static_cast<rcache::Entry**>(std::malloc(grown * sizeof(rcache::Entry*)));
    if (bigger == nullptr) throw std::bad_alloc();
    std::memcpy(bigger, entries(), count_ * sizeof(rcache::Entry*));
    std::free(spill_);
    spill_ = bigger;
    capacity_ = grown;
  }
  entries()[count_++] = entry;
}

RcacheSegment RcacheHandle::segment(std::size_t index) const noexcept {
  if (index >= count_) return {};
  if (pool_registrations_ != nullptr) return {pool_base_, pool_length_, pool_registrations_};
  const rcache::Entry* entry = entries()[index];
  return {reinterpret_cast<void*>(entry->start), entry->length(), entry->registrations};
}

RcacheSegment RcacheHandle::segment_at(const void* address) const noexcept {
  auto wanted = reinterpret_cast<std::uintptr_t>(address);
  for (std::size_t i = 0; i < count_; ++i) {
    RcacheSegment piece = segment(i);
    auto start = reinterpret_cast<std::uintptr_t>(piece.address);
    if (wanted >= start && wanted < start + piece.length) return piece;
  }
  return {};
}

void RcacheHandle::release_entries() noexcept {
  if (pool_registrations_ == nullptr) {
    for (std::size_t i = 0; i < count_; ++i) cache_->release(entries()[i]);
  }
  if (spill_ != nullptr) std::free(spill_);
  spill_ = nullptr;
  count_ = 0;
  capacity_ = kInline;
}

// --- RegistrationCache ---

RegistrationCache::RegistrationCache(std::unique_ptr<rcache::Cache> cache) noexcept
    : cache_(std::move(cache)) {}

RegistrationCache::~RegistrationCache() {
  std::uint64_t held = cache_->stats().entries_in_use;
  if (held == 0) return;
  // Handles still point into the cache: keep it (and its registrations) alive so that
  // their later release is safe, and say so.
  log::warn("rcache",
            "the registration cache is destroyed while handles still hold {} entries; it stays in "
            "memory with their registrations (release every RcacheHandle before destroying the cache)",
            held);
  cache_->abandon();
  static_cast<void>(cache_.release());
}

Expected<std::unique_ptr<RegistrationCache>> RegistrationCache::create(
    std::span<Registrar* const> registrars, RcacheOptions options) {
  if (registrars.empty() || registrars.size() > static_cast<std::size_t>(kMaxRegistrars))
    return make_error(Errc::invalid_argument,
                      fmt::format("a registration cache needs 1 to {} registrars, not {}", kMaxRegistrars,
                                  registrars.size()),
                      "pass one registrar per transport domain");
  std::size_t chunk = options.chunk_bytes;
  if (chunk < (std::size_t{64} << 10) || (chunk & (chunk - 1)) != 0)
    return make_error(Errc::config, fmt::format("the chunk size {} is not a power of two of at least 64K", chunk),
                      "set TETHER_RCACHE_CHUNK to 64K, 2M, 4M ...");
  RcacheOptions defaults = RcacheOptions::from_config();
  if (options.max_count == 0) options.max_count = defaults.max_count;
  if (options.max_bytes == 0) options.max_bytes = defaults.max_bytes;
  auto cache = std::make_unique<rcache::Cache>(registrars, std::move(options));
  return std::unique_ptr<RegistrationCache>(new RegistrationCache(std::move(cache)));
}

Expected<RcacheHandle> RegistrationCache::acquire(const void* address, std::size_t length, Access access) {
  return cache_->acquire(address, length, access);
}

RcacheStats RegistrationCache::stats() const noexcept { return cache_->stats(); }

void RegistrationCache::invalidate(const void* address, std::size_t length) noexcept {
  auto start = reinterpret_cast<std::uintptr_t>(address);
  if (length == 0 || length > std::numeric_limits<std::uintptr_t>::max() - start) return;
  cache_->invalidate(start, start + length);
}

void RegistrationCache::flush() noexcept { cache_->flush(); }

}  // namespace tether
