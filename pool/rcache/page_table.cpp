#include "pool/rcache/page_table.hpp"

#include <sys/syscall.h>
#include <unistd.h>

namespace tether::rcache {
namespace {

constexpr std::size_t kRootBytes = sizeof(std::atomic<void*>) << PageTable::kRootBits;
constexpr std::size_t kLeafBytes = sizeof(PageTable::Slot) << PageTable::kLeafBits;

// Raw system calls: the table is mapped and unmapped without the memory monitor's hooks.
void* map_zeroed(std::size_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return memory == MAP_FAILED ? nullptr : memory;
}

}  // namespace

PageTable::PageTable() noexcept : root_(static_cast<std::atomic<Slot*>*>(map_zeroed(kRootBytes))) {}

PageTable::~PageTable() {
  if (root_ == nullptr) return;
  for (std::size_t i = 0; i < (std::size_t{1} << kRootBits); ++i) {
    if (Slot* leaf = root_[i].load(std::memory_order_relaxed)) ::syscall(SYS_munmap, leaf, kLeafBytes);
  }
  ::syscall(SYS_munmap, root_, kRootBytes);
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
      leaf = static_cast<Slot*>(map_zeroed(kLeafBytes));
      root_slot.store(leaf, std::memory_order_release);
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
