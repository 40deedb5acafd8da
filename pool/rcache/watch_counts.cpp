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

// Joins the pieces meeting at `address` when their counts agree (undoes a split).
void WatchCounts::merge_at(std::uintptr_t address) noexcept {
  auto right = pieces_.find(address);
  if (right == pieces_.end() || right == pieces_.begin()) return;
  auto left = std::prev(right);
  if (left->second.end != address || left->second.count != right->second.count) return;
  left->second.end = right->second.end;
  pieces_.erase(right);
}

// Every page of [start, end) in a piece of its own range: split where pieces cross the
// ends, new pieces of count 0 in the gaps. The only step that allocates.
void WatchCounts::cover_with_pieces(std::uintptr_t start, std::uintptr_t end) {
  split_at(start);
  split_at(end);
  std::uintptr_t cursor = start;
  auto it = pieces_.lower_bound(start);
  while (cursor < end) {
    if (it != pieces_.end() && it->first == cursor) {
      cursor = it->second.end;
      ++it;
      continue;
    }
    std::uintptr_t gap_end = it != pieces_.end() && it->first < end ? it->first : end;
    pieces_.emplace_hint(it, cursor, Piece{gap_end, 0});
    cursor = gap_end;
  }
}

void WatchCounts::drop_empty_pieces(std::uintptr_t start, std::uintptr_t end) noexcept {
  for (auto it = pieces_.lower_bound(start); it != pieces_.end() && it->first < end;)
    it = it->second.count == 0 ? pieces_.erase(it) : std::next(it);
}

void WatchCounts::add(std::uintptr_t start, std::uintptr_t end) {
  if (start >= end) return;
  try {
    cover_with_pieces(start, end);
  } catch (...) {
    drop_empty_pieces(start, end);  // splits of counted pieces are harmless
    throw;
  }
  for (auto it = pieces_.lower_bound(start); it != pieces_.end() && it->first < end; ++it) ++it->second.count;
  merge_at(start);
  merge_at(end);
}

std::vector<WatchCounts::Range> WatchCounts::remove(std::span<const Range> ranges) {
  std::vector<Range> released;
  for (const Range& range : ranges) remove_one(range, released);
  std::sort(released.begin(), released.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
  std::vector<Range> merged;
  for (const Range& piece : released) {
    if (!merged.empty() && merged.back().end == piece.start) merged.back().end = piece.end;
    else merged.push_back(piece);
  }
  return merged;
}

// A piece is listed before its count drops, so running out of memory leaves it counted
// (watched a while longer), never at zero in the map.
void WatchCounts::remove_one(const Range& range, std::vector<Range>& released) {
  if (range.start >= range.end) return;
  split_at(range.start);
  split_at(range.end);
  for (auto it = pieces_.lower_bound(range.start); it != pieces_.end() && it->first < range.end;) {
    if (it->second.count > 1) {
      --it->second.count;
      ++it;
      continue;
    }
    released.push_back({it->first, it->second.end});
    it = pieces_.erase(it);
  }
  merge_at(range.start);
  merge_at(range.end);
}

}  // namespace tether::rcache
