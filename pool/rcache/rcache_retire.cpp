// Invalidation (from memory hooks: no allocation, no registrar call, no wait on the miss
// path) and retirement (deregistration later, on the miss path, page by page for
// registrars whose registrations do not nest).
#include <sys/mman.h>

#include <algorithm>
#include <limits>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"

namespace tether::rcache {
namespace {

struct Interval {
  std::uintptr_t start;
  std::uintptr_t end;
};

// Calls `visit` for each part of [start, end) that no interval in `covered` (sorted by
// start) overlaps.
template <class Visit>
void for_each_uncovered(std::uintptr_t start, std::uintptr_t end, const std::vector<Interval>& covered,
                        Visit visit) {
  std::uintptr_t cursor = start;
  for (const Interval& interval : covered) {
    if (interval.start > cursor) visit(cursor, std::min(interval.start, end));
    cursor = std::max(cursor, interval.end);
    if (cursor >= end) return;
  }
  if (cursor < end) visit(cursor, end);
}

}  // namespace

// Takes `entry` out of every shard. The entry must carry kInvalid; the last thing done to
// it is the final index_refs decrement, after which a drain may free it.
void Cache::remove_from_index(Entry* entry) noexcept {
  std::uintptr_t start = entry->start, end = entry->end;
  for_each_shard(start, end, [&](Shard& shard) {
    CriticalSection inside;
    shard.lock.lock();
    auto& slots = shard.slots;
    auto it = std::find_if(slots.begin(), slots.end(), [&](const IndexSlot& slot) {
      return slot.entry == entry && slot.start == start && slot.end == end;
    });
    if (it != slots.end()) {
      slots.erase(it);
      entry->index_refs.fetch_sub(1, std::memory_order_acq_rel);
    }
    shard.lock.unlock();
  });
}

void Cache::push_retired(Entry* entry) noexcept {
  Entry* head = retired_.load(std::memory_order_relaxed);
  do {
    entry->next_retired = head;
  } while (!retired_.compare_exchange_weak(head, entry, std::memory_order_release, std::memory_order_relaxed));
}

void Cache::retire(Entry* entry) noexcept {
  std::uint64_t idle = kInvalid;
  if (!options_.leave_pinned || (entry->state.load() & kInvalid) == 0) {
    // Leave-pinned off: the last release of a valid entry deregisters it.
    std::uint64_t valid_idle = 0;
    if (entry->state.compare_exchange_strong(valid_idle, kInvalid | kDead)) {
      remove_from_index(entry);
      idle = kInvalid | kDead;  // claimed
    }
  }
  if (idle != (kInvalid | kDead) && !entry->state.compare_exchange_strong(idle, kInvalid | kDead)) return;
  push_retired(entry);
  if (CriticalSection::active()) return;
  std::unique_lock guard(miss_mutex_, std::try_to_lock);
  if (guard.owns_lock()) drain_retired();
}

void Cache::drain_retired() noexcept {
  Entry* list = retired_.exchange(nullptr, std::memory_order_acquire);
  while (list != nullptr) {
    Entry* entry = list;
    list = entry->next_retired;
    if (entry->index_refs.load(std::memory_order_acquire) != 0) {
      push_retired(entry);  // an invalidation is still taking it out of the index
      continue;
    }
    destroy(entry);
  }
}

// Deregisters and frees an entry out of the index (miss_mutex_ held).
void Cache::destroy(Entry* entry) noexcept {
  auto [first, last] = registered_.equal_range(entry->start);
  for (auto it = first; it != last; ++it) {
    if (it->second == entry) {
      registered_.erase(it);
      break;
    }
  }
  --held_count_;
  held_bytes_ -= entry->length();
  stat_entries_.store(held_count_, std::memory_order_relaxed);
  stat_bytes_.store(held_bytes_, std::memory_order_relaxed);
  for (std::size_t slot = 0; slot < registrars_.size(); ++slot) deregister_pages(*entry, slot);
  deregistrations_.fetch_add(1, std::memory_order_relaxed);
  delete entry;
}

// Page-granular release: for a registrar whose registrations do not nest, only the pages
// no other registered entry covers are deregistered (and given back to fork()).
void Cache::deregister_pages(const Entry& entry, std::size_t slot) noexcept {
  std::vector<Interval> covered;
  std::uintptr_t from = entry.start > options_.chunk_bytes ? entry.start - options_.chunk_bytes : 0;
  for (auto it = registered_.lower_bound(from); it != registered_.end() && it->first < entry.end; ++it) {
    const Entry* other = it->second;
    if (other != &entry && other->end > entry.start) covered.push_back({other->start, other->end});
  }
  bool last_slot = slot + 1 == registrars_.size();
  for_each_uncovered(entry.start, entry.end, covered, [&](std::uintptr_t start, std::uintptr_t end) {
    if (!last_slot) return;
    ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DOFORK);
    uffd_unwatch(start, end);
  });
  const Registration& whole = entry.registrations[slot];
  if (whole.address == nullptr) return;
  if (!options_.non_nesting[slot]) {
    registrars_[slot]->deregister(whole);
    return;
  }
  for_each_uncovered(entry.start, entry.end, covered, [&](std::uintptr_t start, std::uintptr_t end) {
    Registration part = whole;
    part.address = reinterpret_cast<void*>(start);
    part.length = end - start;
    registrars_[slot]->deregister(part);
  });
}

void Cache::invalidate(std::uintptr_t start, std::uintptr_t end) noexcept {
  start &= ~(kPageBytes - 1);
  end = end > std::numeric_limits<std::uintptr_t>::max() - kPageBytes ? end : (end + kPageBytes - 1) & ~(kPageBytes - 1);
  if (start >= end) return;
  if (CriticalSection::active()) {
    queue_pending(start, end);
    return;
  }
  invalidate_now(start, end);
}

void Cache::invalidate_now(std::uintptr_t start, std::uintptr_t end) noexcept {
  for_each_shard(start, end, [&](Shard& shard) {
    while (invalidate_in_shard(shard, start, end) != 0) {
    }
  });
}

// Takes a batch of entries overlapping [start, end) out of one shard and marks them
// invalid; then out of their other shards. Returns the batch size (0: shard clean).
std::size_t Cache::invalidate_in_shard(Shard& shard, std::uintptr_t start, std::uintptr_t end) noexcept {
  constexpr std::size_t kBatch = 32;
  Entry* batch[kBatch];
  std::size_t taken = 0;
  {
    CriticalSection inside;
    shard.lock.lock();
    auto& slots = shard.slots;
    auto it = std::lower_bound(slots.begin(), slots.end(), start > options_.chunk_bytes ? start - options_.chunk_bytes : 0,
                               [](const IndexSlot& slot, std::uintptr_t a) { return slot.start < a; });
    while (it != slots.end() && it->start < end && taken < kBatch) {
      if (it->end <= start) {
        ++it;
        continue;
      }
      Entry* entry = it->entry;
      std::uint64_t before = entry->state.fetch_or(kInvalid, std::memory_order_acq_rel);
      it = slots.erase(it);
      // For an entry this call marks, the slot's index reference is held back until the
      // end, so no drain frees the entry while it is still being taken out.
      if ((before & kInvalid) == 0) {
        batch[taken++] = entry;
      } else {
        entry->index_refs.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
    shard.lock.unlock();
  }
  for (std::size_t i = 0; i < taken; ++i) {
    Entry* entry = batch[i];
    invalidations_.fetch_add(1, std::memory_order_relaxed);
    remove_from_index(entry);
    std::uint64_t idle = kInvalid;
    if (entry->state.compare_exchange_strong(idle, kInvalid | kDead)) push_retired(entry);
    entry->index_refs.fetch_sub(1, std::memory_order_acq_rel);  // last touch of the entry
  }
  return taken;
}

void Cache::queue_pending(std::uintptr_t start, std::uintptr_t end) noexcept {
  pending_lock_.lock();
  if (pending_used_ < kPendingSlots) {
    pending_[pending_used_++] = PendingRange{start, end};
  } else {
    pending_overflow_.store(true, std::memory_order_relaxed);  // drain drops everything
  }
  pending_count_.fetch_add(1, std::memory_order_release);
  pending_lock_.unlock();
}

void Cache::drain_pending() noexcept {
  PendingRange ranges[kPendingSlots];
  pending_lock_.lock();
  std::size_t used = pending_used_;
  std::copy(pending_, pending_ + used, ranges);
  pending_used_ = 0;
  bool overflow = pending_overflow_.exchange(false, std::memory_order_relaxed);
  pending_count_.store(0, std::memory_order_release);
  pending_lock_.unlock();
  for (std::size_t i = 0; i < used; ++i) invalidate_now(ranges[i].start, ranges[i].end);
  if (overflow) invalidate_now(0, std::numeric_limits<std::uintptr_t>::max() & ~(kPageBytes - 1));
}

void Cache::flush() noexcept {
  std::lock_guard guard(miss_mutex_);
  drain_retired();
  evict_idle(held_count_, 0);
}

}  // namespace tether::rcache
