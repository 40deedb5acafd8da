// Request slots: a fixed table, handed out and returned through a lock-free stack so any
// thread can start a request. A slot's state is atomic; everything else belongs to the
// progress engine while the request is pending.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/messaging/index_stack.hpp"
#include "tether/pool.hpp"
#include "tether/rcache.hpp"
#include "runtime/messaging/wire.hpp"
#include "tether/runtime.hpp"

namespace tether::messaging {

enum class SlotState : std::uint8_t { free, pending, done, failed };
enum class RequestKind : std::uint8_t { send, receive };

struct RequestSlot {
  std::atomic<SlotState> state{SlotState::free};
  std::atomic<std::uint32_t> generation{1};
  RequestKind kind = RequestKind::send;
  const void* send_buffer = nullptr;
  void* receive_buffer = nullptr;
  std::size_t buffer_bytes = 0;
  int peer = kAnySource;  // destination of a send, wanted source of a receive
  int tag = kAnyTag;
  MessageInfo info;
  bool watched = false;       // counted in its peer's waiting_requests (liveness)
  // run_command ran (progress lock held): until then another thread's start may still be
  // queued, its peer not yet read, and only run_command may fail it (a dead peer).
  bool started = false;
  // Rendezvous state.
  RcacheHandle cached;        // a user buffer's registration from the engine's cache, or
  Registration registration;  // one registered for this transfer (the range spans cache entries)
  bool registered = false;
  transport::ExposedRange pool_key;  // a pool buffer's key handed to the peer (TETHER_REMOTE_KEYS)
  std::uint64_t chunks_left = 0;      // chunk completions (or notifications) still to come
  std::uint64_t posted_bytes = 0;     // of transfer_bytes, handed to the transport so far
  std::uint64_t transfer_bytes = 0;   // what moves by RMA
  std::uint64_t chunk_bytes = 0;
  transport::RemoteBuffer remote{};   // the peer's buffer (put: target; get, split: source)
  RequestId peer_request{};           // the other side's request
  RendezvousProtocol protocol = RendezvousProtocol::put;
  bool fin_due = false;               // a split send: its CTS came, its FIN not yet
  // A failed put or split (engine_rendezvous.cpp): the sender stops writing, and once its
  // writes in flight are done tells the receiver how many landed (abort).
  Errc transfer_error = Errc::ok;     // the first failure; the request ends with it
  std::uint64_t writes_in_flight = 0; // send: chunk writes posted, not completed
  std::uint64_t writes_landed = 0;    // send: chunk writes completed; receive: their notifications in
  std::uint64_t writes_due = 0;       // receive: the sender's write notifications still to come
  // Links in the engine's list of posted receives (PostedReceives).
  RequestSlot* posted_next = nullptr;
  RequestSlot* posted_prev = nullptr;
};

// Posted receives in post order, linked through the slots themselves: posting and
// matching a receive allocate nothing.
class PostedReceives {
 public:
  void push_back(RequestSlot* slot) noexcept {
    slot->posted_next = nullptr;
    slot->posted_prev = tail_;
    (tail_ != nullptr ? tail_->posted_next : head_) = slot;
    tail_ = slot;
  }
  void erase(RequestSlot* slot) noexcept {
    (slot->posted_prev != nullptr ? slot->posted_prev->posted_next : head_) = slot->posted_next;
    (slot->posted_next != nullptr ? slot->posted_next->posted_prev : tail_) = slot->posted_prev;
    slot->posted_next = slot->posted_prev = nullptr;
  }
  [[nodiscard]] bool first_is(const RequestSlot* slot) const noexcept { return head_ == slot; }
  [[nodiscard]] bool contains(const RequestSlot* slot) const noexcept {
    return slot->posted_prev != nullptr || head_ == slot;
  }
  // The first slot satisfying `wanted`, in post order, or nullptr.
  template <typename Predicate>
  [[nodiscard]] RequestSlot* find_first(Predicate wanted) const noexcept {
    for (RequestSlot* slot = head_; slot != nullptr; slot = slot->posted_next)
      if (wanted(slot)) return slot;
    return nullptr;
  }

 private:
  RequestSlot* head_ = nullptr;
  RequestSlot* tail_ = nullptr;
};

class RequestTable {
 public:
  explicit RequestTable(std::uint32_t capacity);

  // A pending slot, or nullptr when every slot is in use.
  RequestSlot* acquire(RequestKind kind, Request& request) noexcept;
  // The slot `request` names if it is still current; nullptr if stale or out of range.
  RequestSlot* find(const Request& request) noexcept {
    if (request.slot >= capacity_) return nullptr;
    RequestSlot& slot = slots_[request.slot];
    if (slot.generation.load(std::memory_order_acquire) != request.generation) return nullptr;
    if (slot.state.load(std::memory_order_acquire) == SlotState::free) return nullptr;
    return &slot;
  }
  RequestSlot* find(RequestId id) noexcept;
  void release(RequestSlot* slot) noexcept;
  // For a caller holding the engine's progress lock: slots released under it wait in a
  // list of their own and are handed out again without a compare-and-swap.
  RequestSlot* acquire_locked(RequestKind kind, Request& request) noexcept {
    if (free_locked_.empty()) return acquire(kind, request);
    std::uint32_t index = free_locked_.back();
    free_locked_.pop_back();
    return prepare(index, kind, request);
  }
  void release_locked(RequestSlot* slot) noexcept {
    retire(slot);
    free_locked_.push_back(static_cast<std::uint32_t>(slot - slots_.get()));
  }
  // The slot at `index`, for the engine that owns pending slots.
  [[nodiscard]] RequestSlot* at(std::uint32_t index) noexcept { return &slots_[index]; }
  [[nodiscard]] std::size_t pending_count() const noexcept;
  [[nodiscard]] RequestId id_of(const RequestSlot* slot) const noexcept;
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }

 private:
  std::uint32_t capacity_;
  RequestSlot* prepare(std::uint32_t index, RequestKind kind, Request& request) noexcept {
    RequestSlot& slot = slots_[index];
    slot.kind = kind;
    slot.info = MessageInfo{};
    slot.registered = false;
    slot.watched = false;
    slot.started = false;
    slot.chunks_left = 0;
    slot.posted_bytes = 0;
    slot.transfer_bytes = 0;
    slot.protocol = RendezvousProtocol::put;
    slot.fin_due = false;
    slot.transfer_error = Errc::ok;
    slot.writes_in_flight = 0;
    slot.writes_landed = 0;
    slot.writes_due = 0;
    request = Request{index, slot.generation.load(std::memory_order_relaxed)};
    slot.state.store(SlotState::pending, std::memory_order_release);
    return &slot;
  }
  // Only the thread that finished the request releases it: no other writer to race.
  void retire(RequestSlot* slot) noexcept {
    slot->generation.store(slot->generation.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    slot->state.store(SlotState::free, std::memory_order_release);
  }

  std::unique_ptr<RequestSlot[]> slots_;
  IndexStack free_;
  std::vector<std::uint32_t> free_locked_;  // reserved to capacity: pushing never allocates
};

}  // namespace tether::messaging
