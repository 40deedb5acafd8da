// How many live cache entries, across every cache of the process, cover each page watched
// by the userfaultfd. Caches share one userfaultfd, and UFFDIO_UNREGISTER is not counted
// by the kernel: a range may leave the userfaultfd only when the last entry over it goes,
// or one cache letting pages go would blind another that still holds them. Counting
// follows entries, not mappings: an entry whose memory was unmapped still holds its count
// until it is destroyed, so a stale entry's release never takes a count a newer entry at
// the same address added. Not thread-safe: uffd_monitor.cpp serialises every call, with
// the ioctl it leads to.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace tether::rcache {

class WatchCounts {
 public:
  struct Range {
    std::uintptr_t start;
    std::uintptr_t end;
  };

  // One count more on every page of [start, end); all or nothing if memory runs out.
  void add(std::uintptr_t start, std::uintptr_t end);
  // Takes one count off every page of each range; returns the pieces whose count fell to
  // zero, sorted and merged where adjacent (one UFFDIO_UNREGISTER each). Pages never
  // added are skipped.
  std::vector<Range> remove(std::span<const Range> ranges);
  [[nodiscard]] std::size_t pieces() const noexcept { return pieces_.size(); }

 private:
  struct Piece {
    std::uintptr_t end;
    std::uint32_t count;
  };
  void split_at(std::uintptr_t address);
  void merge_at(std::uintptr_t address) noexcept;
  void cover_with_pieces(std::uintptr_t start, std::uintptr_t end);
  void drop_empty_pieces(std::uintptr_t start, std::uintptr_t end) noexcept;
  void remove_one(const Range& range, std::vector<Range>& released);

  std::map<std::uintptr_t, Piece> pieces_;  // disjoint, keyed by start; counts >= 1 between calls
};

}  // namespace tether::rcache
