// A fixed table of in-flight operations with a free list. A full table is back-pressure:
// the post call returns Status::retry. The provider's per-operation scratch space
// (struct fi_context2) comes first, so an Operation* is what the provider hands back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/transport.hpp"

namespace tether::transport {

// What a backend posted an operation for: the caller's operation, or one of its own.
enum class OperationUse : std::uint8_t {
  caller,
  write_then_notify,     // ofi without remote CQ data: a write whose notification is sent when it lands
  notification_receive,  // ofi: a receive the backend keeps posted for such notifications
};

struct Operation {
  alignas(16) unsigned char provider_scratch[64];  // fi_context2 lives here for libfabric
  CompletionKind kind = CompletionKind::send_done;
  OperationUse use = OperationUse::caller;
  std::uint64_t notification = 0;  // write_then_notify: what the target is told
  PeerIndex peer = kUnknownPeer;
  std::uint64_t context = 0;
  void* buffer = nullptr;
  std::size_t length = 0;
  Operation* next_free = nullptr;
};

class OperationTable {
 public:
  explicit OperationTable(std::size_t capacity) : operations_(capacity) {
    for (auto& operation : operations_) release(&operation);
  }
  // nullptr when every slot is in flight.
  [[nodiscard]] Operation* acquire(CompletionKind kind, PeerIndex peer, std::uint64_t context,
                                   void* buffer, std::size_t length) noexcept {
    Operation* operation = free_;
    if (operation == nullptr) return nullptr;
    free_ = operation->next_free;
    operation->kind = kind;
    operation->use = OperationUse::caller;
    operation->peer = peer;
    operation->context = context;
    operation->buffer = buffer;
    operation->length = length;
    ++in_flight_;
    return operation;
  }
  void release(Operation* operation) noexcept {
    operation->next_free = free_;
    free_ = operation;
    if (in_flight_ > 0) --in_flight_;
  }
  [[nodiscard]] bool owns(const void* pointer) const noexcept {
    auto* first = operations_.data();
    return pointer >= first && pointer < first + operations_.size();
  }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }

 private:
  std::vector<Operation> operations_;
  Operation* free_ = nullptr;
  std::size_t in_flight_ = 0;
};

}  // namespace tether::transport
