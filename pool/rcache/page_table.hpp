// The cache's index: a two-level radix table from page number to the entry covering it.
// Reads are lock-free (two dependent loads); entries are type-stable (recycled, never
// freed while the cache lives), so a reader holding a stale pointer can check it.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tether::rcache {

struct Entry;

class PageTable {
 public:
  static constexpr unsigned kPageShift = 12;
  static constexpr unsigned kLeafBits = 18;              // a leaf covers 1 GiB: 2 MiB of slots, one huge page
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

// Zeroed memory in 2 MiB chunks aligned to 2 MiB and advised onto huge pages
// (MADV_HUGEPAGE; the kernel may still use small pages): a hit reads one random slot and
// one random entry, and 100,000 of them on 4 KiB pages miss the TLB every time. Mapped and
// unmapped with raw system calls, out of the memory monitor's sight. Chunks are freed with
// the owner.
class HugeChunks {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{2} << 20;
  HugeChunks() = default;
  ~HugeChunks();
  HugeChunks(const HugeChunks&) = delete;
  HugeChunks& operator=(const HugeChunks&) = delete;
  // `bytes` (at most kChunkBytes, 64-byte aligned) from the current chunk or a new one;
  // nullptr when mapping fails.
  [[nodiscard]] void* take(std::size_t bytes) noexcept;

 private:
  std::vector<void*> chunks_;
  std::size_t used_ = kChunkBytes;  // of the last chunk
};

// One 2 MiB-aligned chunk of `bytes` (a multiple of 2 MiB) advised onto huge pages, or nullptr.
[[nodiscard]] void* map_huge_aligned(std::size_t bytes) noexcept;
void unmap_raw(void* memory, std::size_t bytes) noexcept;

}  // namespace tether::rcache
