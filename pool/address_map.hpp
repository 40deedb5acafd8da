// A two-level radix map from addresses to metadata, read lock-free in O(1): one load for
// the leaf, one for the entry. Entries are set for whole granules of 2^GranuleShift bytes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

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

  // Without a lock (one a thread held at fork() would stay held in the child): threads
  // racing to make a leaf each make one, the first installed wins, the others free theirs.
  Leaf* leaf_for(std::uintptr_t key) noexcept {
    auto& slot = root_[key >> kLeafBits];
    if (Leaf* leaf = slot.load(std::memory_order_acquire)) return leaf;
    auto* made = static_cast<Leaf*>(std::calloc(1, sizeof(Leaf)));  // zeroed: all entries null
    if (made == nullptr) return nullptr;
    Leaf* installed = nullptr;
    if (slot.compare_exchange_strong(installed, made, std::memory_order_acq_rel)) return made;
    std::free(made);
    return installed;
  }

  std::array<std::atomic<Leaf*>, std::size_t{1} << kRootBits> root_{};
};

}  // namespace tether::pool
