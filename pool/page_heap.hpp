// Free runs of 64 KiB blocks inside one arena: first fit, coalescing on return.
// Not thread-safe: the arena's heap_mutex guards it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace tether::pool {

class PageHeap {
 public:
  explicit PageHeap(std::uint32_t block_count);

  // First block of a free run of `count` blocks whose start is a multiple of `alignment`.
  [[nodiscard]] std::optional<std::uint32_t> take(std::uint32_t count, std::uint32_t alignment);
  void give_back(std::uint32_t first, std::uint32_t count);
  [[nodiscard]] std::uint32_t free_blocks() const noexcept { return free_blocks_; }

 private:
  void carve(std::map<std::uint32_t, std::uint32_t>::iterator run, std::uint32_t first,
             std::uint32_t count);

  std::map<std::uint32_t, std::uint32_t> runs_;  // first block -> length
  std::uint32_t free_blocks_;
};

}  // namespace tether::pool
