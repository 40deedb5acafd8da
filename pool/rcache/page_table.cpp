#include "pool/rcache/page_table.hpp"

#include <sys/syscall.h>
#include <unistd.h>

namespace tether::rcache {
namespace {

constexpr std::size_t kRootBytes = sizeof(std::atomic<void*>) << PageTable::kRootBits;
constexpr std::size_t kLeafBytes = sizeof(PageTable::Slot) << PageTable::kLeafBits;
static_assert(kLeafBytes % HugeChunks::kChunkBytes == 0);

// Raw system calls: the table is mapped and unmapped without the memory monitor's hooks.
void* map_zeroed(std::size_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

}  // namespace

void* map_huge_aligned(std::size_t bytes) noexcept {
  constexpr std::size_t kAlign = HugeChunks::kChunkBytes;
  auto* raw = static_cast<std::byte*>(map_zeroed(bytes + kAlign));
  if (raw == nullptr) return nullptr;
  auto address = reinterpret_cast<std::uintptr_t>(raw);
  std::uintptr_t aligned = (address + kAlign - 1) & ~(kAlign - 1);
  std::size_t head = aligned - address;
  if (head > 0) unmap_raw(raw, head);
  if (kAlign - head > 0) unmap_raw(reinterpret_cast<std::byte*>(aligned) + bytes, kAlign - head);
  (void)::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // advice only
  return reinterpret_cast<void*>(aligned);
}

void unmap_raw(void* memory, std::size_t bytes) noexcept { ::syscall(SYS_munmap, memory, bytes); }

HugeChunks::~HugeChunks() {
  for (void* chunk : chunks_) unmap_raw(chunk, kChunkBytes);
}

void* HugeChunks::take(std::size_t bytes) noexcept {
  bytes = (bytes + 63) & ~std::size_t{63};
  if (bytes > kChunkBytes) return nullptr;
  if (kChunkBytes - used_ < bytes) {
    void* chunk = map_huge_aligned(kChunkBytes);
    if (chunk == nullptr) return nullptr;
    try {
      chunks_.push_back(chunk);
    } catch (...) {
      unmap_raw(chunk, kChunkBytes);
      return nullptr;
    }
    used_ = 0;
  }
  void* memory = static_cast<std::byte*>(chunks_.back()) + used_;
  used_ += bytes;
  return memory;
}

PageTable::PageTable() noexcept : root_(static_cast<std::atomic<Slot*>*>(map_zeroed(kRootBytes))) {}

PageTable::~PageTable() {
  if (root_ == nullptr) return;
  for (std::size_t i = 0; i < (std::size_t{1} << kRootBits); ++i) {
    if (Slot* leaf = root_[i].load(std::memory_order_relaxed)) unmap_raw(leaf, kLeafBytes);
  }
  unmap_raw(root_, kRootBytes);
}

PageTable::Slot* PageTable::slot(std::uintptr_t address, bool create) noexcept {
  std::uintptr_t page = address >> kPageShift;
  if ((page >> (kRootBits + kLeafBits)) != 0) return nullptr;
  auto& root_slot = root_[page >> kLeafBits];
  Slot* leaf = root_slot.load(std::memory_order_acquire);
  if (leaf == nullptr && create) {
    std::lock_guard guard(grow_mutex_);
    leaf = root_slot.load(std::memory_order_acquire);
    if (leaf == nullptr) {
      leaf = static_cast<Slot*>(map_huge_aligned(kLeafBytes));
      if (leaf != nullptr) root_slot.store(leaf, std::memory_order_release);
    }
  }
  return leaf == nullptr ? nullptr : &leaf[page & (kLeafPages - 1)];
}

std::uintptr_t PageTable::next_populated(std::uintptr_t address, std::uintptr_t end) const noexcept {
  while (address < end) {
    std::uintptr_t page = address >> kPageShift;
    if ((page >> (kRootBits + kLeafBits)) != 0) return end;
    if (root_[page >> kLeafBits].load(std::memory_order_acquire) != nullptr) return address;
    std::uintptr_t next_leaf = ((page >> kLeafBits) + 1) << (kLeafBits + kPageShift);
    if (next_leaf <= address) return end;
    address = next_leaf;
  }
  return end;
}

}  // namespace tether::rcache
