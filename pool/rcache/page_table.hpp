// The cache's index: a two-level radix table from page number to the entry covering it.
// Reads are lock-free (two dependent loads); entries are type-stable (recycled, never
// freed while the cache lives), so a reader holding a stale pointer can check it.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace tether::rcache {

struct Entry;

class PageTable {
 public:
  static constexpr unsigned kPageShift = 12;
  static constexpr unsigned kLeafBits = 16;              // a leaf covers 256 MiB
  static constexpr unsigned kRootBits = 48 - kPageShift - kLeafBits;
  static constexpr std::uintptr_t kLeafPages = std::uintptr_t{1} << kLeafBits;
  using Slot = std::atomic<Entry*>;

  PageTable() noexcept;
  ~PageTable();
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;
  [[nodiscard]] bool usable() const noexcept { return root_ != nullptr; }

  [[nodiscard]] Entry* find(std::uintptr_t address) const noexcept {
    std::uintptr_t page = address >> kPageShift;
    if ((page >> (kRootBits + kLeafBits)) != 0) return nullptr;
    Slot* leaf = root_[page >> kLeafBits].load(std::memory_order_acquire);
    return leaf == nullptr ? nullptr : leaf[page & (kLeafPages - 1)].load(std::memory_order_acquire);
  }
  // The slot of `address`, or nullptr when its leaf does not exist (and `create` is false,
  // or mapping a leaf failed).
  Slot* slot(std::uintptr_t address, bool create) noexcept;
  // Next page start at or after `address` that may have a slot (skips missing leaves).
  [[nodiscard]] std::uintptr_t next_populated(std::uintptr_t address, std::uintptr_t end) const noexcept;

 private:
  std::atomic<Slot*>* root_ = nullptr;  // mmapped, 2^kRootBits pointers
  std::mutex grow_mutex_;
};

}  // namespace tether::rcache
