#include "pool/rcache/watch_counts.hpp"

#include <algorithm>
#include <iterator>

namespace tether::rcache {

// Cuts the piece holding `address` in two there, so that pieces start and end on it.
void WatchCounts::split_at(std::uintptr_t address) {
  auto after = pieces_.upper_bound(address);
  if (after == pieces_.begin()) return;
  auto holder = std::prev(after);
  if (holder->first >= address || holder->second.end <= address) return;
  pieces_.emplace_hint(after, address, Piece{holder->second.end, holder->second.count});
  holder->second.end = address;
}

void WatchCounts::add(std::uintptr_t start, std::uintptr_t end) {
  if (start >= end) return;
  std::lock_guard guard(mutex_);
  split_at(start);
  split_at(end);
  std::uintptr_t cursor = start;
  auto it = pieces_.lower_bound(start);
  while (cursor < end) {
    if (it != pieces_.end() && it->first == cursor) {
      ++it->second.count;
      cursor = it->second.end;
      ++it;
      continue;
    }
    std::uintptr_t gap_end = it != pieces_.end() && it->first < end ? it->first : end;
    pieces_.emplace_hint(it, cursor, Piece{gap_end, 1});
    cursor = gap_end;
  }
}

std::vector<WatchCounts::Range> WatchCounts::remove(std::span<const Range> ranges) {
  std::vector<Range> released;
  {
    std::lock_guard guard(mutex_);
    for (const Range& range : ranges) remove_one(range, released);
  }
  std::sort(released.begin(), released.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
  std::vector<Range> merged;
  for (const Range& piece : released) {
    if (!merged.empty() && merged.back().end == piece.start) merged.back().end = piece.end;
    else merged.push_back(piece);
  }
  return merged;
}

// Pages no piece holds (never added) are skipped.
void WatchCounts::remove_one(const Range& range, std::vector<Range>& released) {
  if (range.start >= range.end) return;
  split_at(range.start);
  split_at(range.end);
  for (auto it = pieces_.lower_bound(range.start); it != pieces_.end() && it->first < range.end;) {
    if (--it->second.count > 0) {
      ++it;
      continue;
    }
    released.push_back({it->first, it->second.end});
    it = pieces_.erase(it);
  }
}

std::size_t WatchCounts::pieces() const {
  std::lock_guard guard(mutex_);
  return pieces_.size();
}

}  // namespace tether::rcache
