#include "pool/page_heap.hpp"

namespace tether::pool {

PageHeap::PageHeap(std::uint32_t block_count) : free_blocks_(block_count) {
  if (block_count > 0) runs_.emplace(0, block_count);
}

std::optional<std::uint32_t> PageHeap::take(std::uint32_t count, std::uint32_t alignment) {
  for (auto run = runs_.begin(); run != runs_.end(); ++run) {
    std::uint32_t first = (run->first + alignment - 1) / alignment * alignment;
    std::uint64_t end = std::uint64_t{run->first} + run->second;
    if (std::uint64_t{first} + count > end) continue;
    carve(run, first, count);
    return first;
  }
  return std::nullopt;
}

void PageHeap::carve(std::map<std::uint32_t, std::uint32_t>::iterator run, std::uint32_t first,
                     std::uint32_t count) {
  std::uint32_t run_first = run->first;
  std::uint32_t run_end = run->first + run->second;
  runs_.erase(run);
  if (first > run_first) runs_.emplace(run_first, first - run_first);
  if (first + count < run_end) runs_.emplace(first + count, run_end - (first + count));
  free_blocks_ -= count;
}

void PageHeap::give_back(std::uint32_t first, std::uint32_t count) {
  free_blocks_ += count;
  auto next = runs_.lower_bound(first);
  if (next != runs_.end() && next->first == first + count) {
    count += next->second;
    next = runs_.erase(next);
  }
  if (next != runs_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == first) {
      previous->second += count;
      return;
    }
  }
  runs_.emplace(first, count);
}

}  // namespace tether::pool
