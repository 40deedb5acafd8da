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

RequestSlot* RequestTable::acquire_locked(RequestKind kind, Request& request) noexcept {
  if (free_locked_.empty()) return acquire(kind, request);
  std::uint32_t index = free_locked_.back();
  free_locked_.pop_back();
  return prepare(index, kind, request);
}

RequestSlot* RequestTable::prepare(std::uint32_t index, RequestKind kind, Request& request) noexcept {
  RequestSlot& slot = slots_[index];
  slot.kind = kind;
  slot.info = MessageInfo{};
  slot.registered = false;
  slot.watched = false;
  slot.chunks_left = 0;
  slot.posted_bytes = 0;
  slot.transfer_bytes = 0;
  request = Request{index, slot.generation.load(std::memory_order_relaxed)};
  slot.state.store(SlotState::pending, std::memory_order_release);
  return &slot;
}

RequestSlot* RequestTable::find(const Request& request) noexcept {
  if (request.slot >= capacity_) return nullptr;
  RequestSlot& slot = slots_[request.slot];
  if (slot.generation.load(std::memory_order_acquire) != request.generation) return nullptr;
  if (slot.state.load(std::memory_order_acquire) == SlotState::free) return nullptr;
  return &slot;
}

RequestSlot* RequestTable::find(RequestId id) noexcept {
  return find(Request{id.index, id.generation});
}

// Only the thread that finished the request releases it: no other writer to race.
void RequestTable::retire(RequestSlot* slot) noexcept {
  slot->generation.store(slot->generation.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  slot->state.store(SlotState::free, std::memory_order_release);
}

void RequestTable::release(RequestSlot* slot) noexcept {
  retire(slot);
  free_.push(static_cast<std::uint32_t>(slot - slots_.get()));
}

void RequestTable::release_locked(RequestSlot* slot) noexcept {
  retire(slot);
  free_locked_.push_back(static_cast<std::uint32_t>(slot - slots_.get()));
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
