#include "runtime/messaging/request_table.hpp"

namespace tether::messaging {

RequestTable::RequestTable(std::uint32_t capacity)
    : capacity_(capacity), slots_(new RequestSlot[capacity]), free_(capacity) {
  free_locked_.reserve(capacity);
}

RequestSlot* RequestTable::acquire(RequestKind kind, Request& request) noexcept {
  std::uint32_t index = 0;
  if (!free_.pop(index)) return nullptr;
  return prepare(index, kind, request);
}

RequestSlot* RequestTable::find(RequestId id) noexcept {
  return find(Request{id.index, id.generation});
}

void RequestTable::release(RequestSlot* slot) noexcept {
  retire(slot);
  free_.push(static_cast<std::uint32_t>(slot - slots_.get()));
}

std::size_t RequestTable::pending_count() const noexcept {
  std::size_t pending = 0;
  for (std::uint32_t i = 0; i < capacity_; ++i)
    pending += slots_[i].state.load(std::memory_order_relaxed) == SlotState::pending ? 1 : 0;
  return pending;
}

RequestId RequestTable::id_of(const RequestSlot* slot) const noexcept {
  auto index = static_cast<std::uint32_t>(slot - slots_.get());
  return {index, slot->generation.load(std::memory_order_relaxed)};
}

}  // namespace tether::messaging
