// Bounce buffers set aside at start-up for control messages (RTS, CTS, FIN, refusals,
// credits, probes, channel words), used only once the pool is exhausted: a control message
// lost for want of memory leaves its peer waiting for it for ever, while an application's
// own eager send can fail with a clear out-of-memory error instead. Called with the
// progress lock held.
#pragma once

#include <cstddef>
#include <vector>

#include "pool/include/tether/pool.hpp"

namespace tether::messaging {

class ControlReserve {
 public:
  static constexpr std::size_t kSlots = 64;
  static constexpr std::size_t kSlotBytes = 256;  // the largest control message fits

  ControlReserve() = default;
  ControlReserve(const ControlReserve&) = delete;
  ControlReserve& operator=(const ControlReserve&) = delete;
  ~ControlReserve() { pinned_free(block_); }

  // Takes the slots from the pool; false when the pool cannot spare them.
  [[nodiscard]] bool fill() {
    block_ = static_cast<std::byte*>(pinned_alloc(kSlots * kSlotBytes, 64));
    if (block_ == nullptr) return false;
    free_.reserve(kSlots);
    for (std::size_t i = kSlots; i-- > 0;) free_.push_back(block_ + i * kSlotBytes);
    return true;
  }
  // A slot for a `length`-byte message, or nullptr when none is left or it is too long.
  [[nodiscard]] std::byte* take(std::size_t length) noexcept {
    if (length > kSlotBytes || free_.empty()) return nullptr;
    std::byte* slot = free_.back();
    free_.pop_back();
    return slot;
  }
  [[nodiscard]] bool owns(const void* bounce) const noexcept {
    const auto* byte = static_cast<const std::byte*>(bounce);
    return block_ != nullptr && byte >= block_ && byte < block_ + kSlots * kSlotBytes;
  }
  void give_back(void* bounce) noexcept { free_.push_back(static_cast<std::byte*>(bounce)); }  // room reserved
  [[nodiscard]] std::size_t left() const noexcept { return free_.size(); }

 private:
  std::byte* block_ = nullptr;
  std::vector<std::byte*> free_;
};

}  // namespace tether::messaging
