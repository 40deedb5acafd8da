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

// Clears every slot that names `entry` (a slot already naming a newer entry is kept).
void Cache::remove_from_index(Entry* entry) noexcept {
  for (std::uintptr_t page = entry->start; page < entry->end; page += kPageBytes) {
    PageTable::Slot* slot = table_.slot(page, false);
    Entry* expected = entry;
    if (slot != nullptr) slot->compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
}

void Cache::push_retired(Entry* entry) noexcept {
  Entry* head = retired_.load(std::memory_order_relaxed);
  do {
    entry->next_retired = head;
  } while (!retired_.compare_exchange_weak(head, entry, std::memory_order_release, std::memory_order_relaxed));
}

// A dropped reference may be the last one of an invalid entry (claim and retire it), or,
// with leave-pinned off, of a valid one (take it out of use).
void Cache::drop_reference(Entry* entry) noexcept {
  if (drop_and_claim(entry, ref_slot())) retire(entry);
}

// Drops a reference in `slot`'s row; true when that left an invalid entry unreferenced and
// this call claimed it (the caller queues it).
bool Cache::drop_and_claim(Entry* entry, RefSlot slot) noexcept {
  add_ref_in(slot, *entry, kDrop);
  return claim_after_drop(entry, slot);
}

bool Cache::claim_after_drop(Entry* entry, RefSlot slot) noexcept {
  std::uint64_t state = entry->state.load();
  if ((state & kDead) != 0) return false;
  if ((state & kInvalid) != 0) return claim_if_unreferenced(entry);
  if (options_.leave_pinned || (state & kEvicting) != 0 || total_refs(*entry) != 0) return false;
  return mark_invalid(entry, slot).claimed;  // leave-pinned off; the sum was a hint
}

// Claims an invalid entry that no reference holds any more (false when one does, or when
// another thread claimed it first).
bool Cache::claim_if_unreferenced(Entry* entry) noexcept {
  std::uint64_t state = entry->state.load();
  if ((state & kInvalid) == 0) return false;
  fence_against_references();  // a reference granted before the flag may not be visible yet
  if (total_refs(*entry) != 0) return false;
  return claim(entry, state);
}

// Claims an entry that nobody references, valid or not (miss path: nothing recycles
// entries meanwhile). A valid one is marked kEvicting first, so that no reference is
// granted while the rows are summed; found in use, it is left as it was. The claim
// succeeds only from exactly the state marked: an invalidation that came meanwhile holds
// a reference the sum may have missed, and its own drop claims the entry.
bool Cache::claim_if_idle(Entry* entry) noexcept {
  std::uint64_t state = entry->state.load();
  if ((state & (kDead | kEvicting)) != 0 || total_refs(*entry) != 0) return false;  // in use already
  if ((state & kInvalid) != 0) return claim_if_unreferenced(entry);
  std::uint64_t evicting = state | kEvicting;
  if (!entry->state.compare_exchange_strong(state, evicting)) return false;
  fence_against_references();
  if (total_refs(*entry) == 0 && entry->state.compare_exchange_strong(evicting, claimed_state(evicting))) return true;
  entry->state.fetch_and(~kEvicting);
  return false;
}

// Claims `entry` in the generation `state` names, whatever flags it gained meanwhile;
// false once it is dead or reused.
bool Cache::claim(Entry* entry, std::uint64_t state) noexcept {
  std::uint64_t generation = state & kGeneration;
  while ((state & kDead) == 0 && (state & kGeneration) == generation) {
    if (entry->state.compare_exchange_weak(state, claimed_state(state))) return true;
  }
  return false;
}

// Takes `entry` out of the index for good; its last reference then claims it. The
// reference taken here keeps anyone else from claiming it while its slots are cleared
// (an eviction racing with it fails its claim: claim_if_idle). Never deregisters: a caller
// told `claimed` queues the entry (also when it was invalid already and this drop was its
// last reference).
Cache::Marked Cache::mark_invalid(Entry* entry, RefSlot slot) noexcept {
  add_ref_in(slot, *entry, kTake);
  std::uint64_t state = entry->state.load();
  bool marked = false;
  while ((state & kInvalid) == 0 && !marked) marked = entry->state.compare_exchange_weak(state, state | kInvalid);
  if (marked) remove_from_index(entry);
  return Marked{marked, drop_and_claim(entry, slot)};
}

// Queues a claimed entry for deregistration, done now when the miss mutex is free.
void Cache::retire(Entry* entry) noexcept {
  push_retired(entry);
  if (CriticalSection::active() || MissPath::held()) return;
  std::unique_lock guard(miss_mutex_, std::try_to_lock);
  if (!guard.owns_lock()) return;
  MissPath holding;  // a hook firing inside the deregistration must not take the mutex again
  drain_retired();
}

void Cache::drain_retired() noexcept {
  Entry* list = retired_.exchange(nullptr, std::memory_order_acquire);
  std::vector<Entry*> victims;
  for (; list != nullptr; list = list->next_retired) victims.push_back(list);
  if (!victims.empty()) destroy(victims);
}

void Cache::unlink(Entry* entry) noexcept {
  auto [first, last] = registered_.equal_range(entry->start);
  for (auto it = first; it != last; ++it) {
    if (it->second == entry) {
      registered_.erase(it);
      break;
    }
  }
  --held_count_;
  held_bytes_ -= entry->length();
}

// Deregisters entries out of the index and keeps them for reuse (miss_mutex_ held).
// Pages are released in coalesced runs: evicting 64 neighbours costs one munlock, one
// madvise and one UFFDIO_UNREGISTER, not 64 of each.
void Cache::destroy(std::span<Entry* const> victims) noexcept {
  for (Entry* entry : victims) unlink(entry);
  stat_entries_.store(held_count_, std::memory_order_relaxed);
  stat_bytes_.store(held_bytes_, std::memory_order_relaxed);
  std::vector<Interval> runs = released_runs(victims);
  for (const Interval& run : runs) {
    ::madvise(reinterpret_cast<void*>(run.start), run.end - run.start, MADV_DOFORK);
  }
  unwatch(victims);
  if (!abandoned_) deregister(victims, runs);
  for (Entry* entry : victims) {
    entry->state.fetch_and(~kEvicting);  // claimed: dead, generation kept
    spare_entries_.push_back(entry);
  }
  deregistrations_.fetch_add(victims.size(), std::memory_order_relaxed);
}

// Each registrar lets go of `victims`: a non-nesting one (mlock) of the released `runs` only.
void Cache::deregister(std::span<Entry* const> victims, std::span<const Interval> runs) noexcept {
  for (std::size_t slot = 0; slot < registrars_.size(); ++slot) {
    if (!options_.non_nesting[slot]) {
      for (Entry* entry : victims) registrars_[slot]->deregister(entry->registrations[slot]);
      continue;
    }
    for (const Interval& run : runs) {
      Registration part = victims.front()->registrations[slot];
      part.address = reinterpret_cast<void*>(run.start);
      part.length = run.end - run.start;
      registrars_[slot]->deregister(part);
    }
  }
}

// Counted across caches: only pages no entry of any cache covers leave the userfaultfd.
void Cache::unwatch(std::span<Entry* const> victims) noexcept {
  try {
    std::vector<Interval> watched;
    for (const Entry* entry : victims)
      if (entry->watch_counted) watched.push_back({entry->start, entry->end});
    uffd_unwatch(watched);
  } catch (...) {  // no memory for the list: one entry at a time
    for (const Entry* entry : victims) {
      Interval one{entry->start, entry->end};
      if (entry->watch_counted) uffd_unwatch({&one, 1});
    }
  }
}

// The pages of `victims` that no registered entry still covers, merged into runs.
std::vector<Interval> Cache::released_runs(std::span<Entry* const> victims) const {
  std::vector<Interval> pieces;
  std::vector<Interval> covered;
  for (const Entry* entry : victims) {
    covered.clear();
    std::uintptr_t from = entry->start > options_.chunk_bytes ? entry->start - options_.chunk_bytes : 0;
    for (auto it = registered_.lower_bound(from); it != registered_.end() && it->first < entry->end; ++it) {
      if (it->second->end > entry->start) covered.push_back({it->second->start, it->second->end});
    }
    for_each_uncovered(entry->start, entry->end, covered,
                       [&](std::uintptr_t start, std::uintptr_t end) { pieces.push_back({start, end}); });
  }
  std::sort(pieces.begin(), pieces.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> runs;
  for (const Interval& piece : pieces) {
    if (!runs.empty() && piece.start <= runs.back().end) {
      runs.back().end = std::max(runs.back().end, piece.end);
    } else {
      runs.push_back(piece);
    }
  }
  return runs;
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
    if (last_slot) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DOFORK);
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

// Walks the page table over the range (skipping leaves that were never made) and drops
// every entry found. Lock-free and allocation-free: safe inside memory hooks.
void Cache::invalidate_now(std::uintptr_t start, std::uintptr_t end) noexcept {
  for (std::uintptr_t page = table_.next_populated(start, end); page < end;) {
    if (Entry* entry = table_.find(page)) invalidate_entry(entry);
    page += kPageBytes;
    if ((page >> PageTable::kPageShift) % PageTable::kLeafPages == 0) page = table_.next_populated(page, end);
  }
}

// The caller found `entry` in a slot; it may have been recycled since, in which case
// invalidating it is merely early (never wrong: invalid entries are only re-registered).
// From memory hooks: no allocation, no lock, no deregistration (the entry is queued).
void Cache::invalidate_entry(Entry* entry) noexcept {
  Marked outcome = mark_invalid(entry, ref_slot_in_hook());
  if (outcome.marked) invalidations_.fetch_add(1, std::memory_order_relaxed);
  if (outcome.claimed) push_retired(entry);
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

void Cache::prepare_fork() noexcept {
  miss_mutex_.lock();  // held across fork(): no registration changes meanwhile
  {
    MissPath holding;  // entries memory hooks invalidated go first, their pages back to fork()
    drain_retired();
  }
  fork_runs_.clear();
  for (const auto& [start, entry] : registered_) {
    if ((entry->state.load() & kFlags) != 0 || total_refs(*entry) != 0) continue;  // in use, or dying
    Interval range = dontfork_range(*entry);
    if (range.start == range.end) continue;
    if (!fork_runs_.empty() && fork_runs_.back().end == range.start) {
      fork_runs_.back().end = range.end;
    } else {
      fork_runs_.push_back(range);
    }
  }
  for (const Interval& run : fork_runs_) ::madvise(reinterpret_cast<void*>(run.start), run.end - run.start, MADV_DOFORK);
}

void Cache::after_fork_in_parent() noexcept {
  for (const Interval& run : fork_runs_) ::madvise(reinterpret_cast<void*>(run.start), run.end - run.start, MADV_DONTFORK);
  miss_mutex_.unlock();
}

void Cache::after_fork_in_child() noexcept { miss_mutex_.unlock(); }

void Cache::abandon() noexcept {
  std::lock_guard guard(miss_mutex_);  // a drain under way ends first: none after it deregisters
  abandoned_ = true;
}

void Cache::flush() noexcept {
  std::lock_guard guard(miss_mutex_);
  MissPath holding;
  drain_retired();
  evict_idle(held_count_, 0);
}

}  // namespace tether::rcache
