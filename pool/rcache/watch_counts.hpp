// How many live cache entries, across every cache of the process, cover each page watched
// by the userfaultfd. Caches share one userfaultfd, and UFFDIO_UNREGISTER is not counted
// by the kernel: a range may leave the userfaultfd only when the last entry over it goes,
// or one cache letting pages go would blind another that still holds them. Counting
// follows entries, not mappings: an entry whose memory was unmapped still holds its count
// until it is destroyed, so a stale entry's release never takes a count a newer entry at
// the same address added.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

namespace tether::rcache {

class WatchCounts {
 public:
  struct Range {
    std::uintptr_t start;
    std::uintptr_t end;
  };

  void add(std::uintptr_t start, std::uintptr_t end);
  // Takes one count off every page of each range; returns the pieces whose count fell to
  // zero, sorted and merged where adjacent (one UFFDIO_UNREGISTER each).
  std::vector<Range> remove(std::span<const Range> ranges);
  // Pieces held (for tests).
  [[nodiscard]] std::size_t pieces() const;

 private:
  struct Piece {
    std::uintptr_t end;
    std::uint32_t count;
  };
  void split_at(std::uintptr_t address);
  void remove_one(const Range& range, std::vector<Range>& released);

  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Piece> pieces_;  // disjoint, keyed by start
};

}  // namespace tether::rcache
