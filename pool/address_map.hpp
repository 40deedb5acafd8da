// A two-level radix map from addresses to metadata, read lock-free in O(1): one load for
// the leaf, one for the entry. Entries are set for whole granules of 2^GranuleShift bytes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace tether::pool {

template <class T, unsigned GranuleShift>
class AddressMap {
 public:
  [[nodiscard]] T* find(const void* address) const noexcept {
    auto key = reinterpret_cast<std::uintptr_t>(address) >> GranuleShift;
    if (key >> kKeyBits) return nullptr;
    Leaf* leaf = root_[key >> kLeafBits].load(std::memory_order_acquire);
    return leaf == nullptr ? nullptr : (*leaf)[key & kLeafMask].load(std::memory_order_acquire);
  }

  // Points every granule of [start, start + bytes) at `value`; false if out of memory.
  bool set(const void* start, std::size_t bytes, T* value) noexcept {
    auto first = reinterpret_cast<std::uintptr_t>(start) >> GranuleShift;
    auto end = (reinterpret_cast<std::uintptr_t>(start) + bytes) >> GranuleShift;
    for (auto key = first; key < end; ++key) {
      Leaf* leaf = leaf_for(key);
      if (leaf == nullptr) return false;
      (*leaf)[key & kLeafMask].store(value, std::memory_order_release);
    }
    return true;
  }

 private:
  static constexpr unsigned kKeyBits = 48 - GranuleShift;
  static constexpr unsigned kRootBits = 14;
  static constexpr unsigned kLeafBits = kKeyBits - kRootBits;
  static constexpr std::uintptr_t kLeafMask = (std::uintptr_t{1} << kLeafBits) - 1;
  using Leaf = std::array<std::atomic<T*>, std::size_t{1} << kLeafBits>;

  Leaf* leaf_for(std::uintptr_t key) noexcept {
    auto& slot = root_[key >> kLeafBits];
    if (Leaf* leaf = slot.load(std::memory_order_acquire)) return leaf;
    std::lock_guard lock(mutex_);
    Leaf* leaf = slot.load(std::memory_order_acquire);
    if (leaf == nullptr) {
      leaf = static_cast<Leaf*>(std::calloc(1, sizeof(Leaf)));  // zeroed: all entries null
      slot.store(leaf, std::memory_order_release);
    }
    return leaf;
  }

  std::array<std::atomic<Leaf*>, std::size_t{1} << kRootBits> root_{};
  std::mutex mutex_;
};

}  // namespace tether::pool
