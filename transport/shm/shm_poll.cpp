// Polling: local completions first, then every claimed ring of this mailbox in turn.
// A message goes to the message reader, if it takes it in place, or waits in its ring
// until a receive is posted (back-pressure on the sender);
// a ring whose indices make no sense is reported once and ignored from then on.
#include <atomic>
#include <cstring>

#include "runtime/base/log.hpp"
#include "transport/shm/shm_transport.hpp"

namespace tether::transport::shm {

PeerIndex ShmTransport::peer_of_ring(std::uint32_t index) noexcept {
  if (ring_peers_[index] != kUnknownPeer) return ring_peers_[index];
  std::uint32_t pid = ring_at(mailbox_, index)->owner_pid.load(std::memory_order_acquire);
  for (PeerIndex peer = 0; peer < peers_.size(); ++peer)
    if (peers_[peer].pid == pid) return ring_peers_[index] = peer;
  return kUnknownPeer;
}

// An entry whose sequence is neither this lap's (ready) nor the last lap's (not yet
// written; 0 before the first lap) means a peer wrote the ring or its head: reported once,
// and the ring is ignored from then on.
void ShmTransport::report_corrupt_ring(Ring& ring, std::uint32_t index, std::uint64_t head,
                                       std::uint64_t sequence) noexcept {
  ring_broken_[index] = 1;
  log::error("transport", "shm-own ring {} (process {}) has head {} and an entry of sequence {}: corrupted; ignored from now on",
             index, ring.owner_pid.load(), head, sequence);
}

// An entry whose sequence is this lap's is ready; one of the last lap's (0 before the
// first lap) is not yet written.
RingEntry* ShmTransport::ready_entry(Ring& ring, std::uint32_t index, std::uint64_t& head) noexcept {
  if (ring_broken_[index] != 0) return nullptr;
  head = ring.head.load(std::memory_order_relaxed);
  RingEntry& entry = ring.entries[head % kRingEntries];
  std::uint64_t sequence = entry.sequence.load(std::memory_order_acquire);
  if (sequence == head + 1) return &entry;
  std::uint64_t not_yet_written = head < kRingEntries ? 0 : head + 1 - kRingEntries;
  if (sequence != not_yet_written) [[unlikely]] report_corrupt_ring(ring, index, head, sequence);
  return nullptr;
}

// Turns a ready entry into a completion, or hands a message to the reader that takes it
// in place; nothing when it must wait (no receive posted) or was dropped (invalid).
ShmTransport::Taken ShmTransport::take_entry(Ring& ring, std::uint32_t index, std::uint64_t head, RingEntry& entry,
                                             Completion& completion) noexcept {
  // One read of each field: the peer may rewrite the entry while it is checked.
  EntryKind kind = std::atomic_ref(const_cast<EntryKind&>(entry.kind)).load(std::memory_order_relaxed);
  std::uint32_t entry_length = std::atomic_ref(const_cast<std::uint32_t&>(entry.length)).load(std::memory_order_relaxed);
  bool valid_message = kind == EntryKind::message && entry_valid(kind, entry_length);
  if (valid_message && message_reader_ != nullptr && message_reader_->take({entry.payload, entry_length})) {
    ring.head.store(head + 1, std::memory_order_release);
    return Taken::in_place;
  }
  completion = Completion{};
  completion.peer = peer_of_ring(index);
  if (kind == EntryKind::remote_write) {
    completion.kind = CompletionKind::remote_write;
    completion.length = entry_length;
    completion.notification = entry.notification;
  } else if (valid_message) {
    if (receives_.empty()) return Taken::nothing;  // the sender's ring fills: back-pressure
    PostedReceive receive = receives_.front();
    receives_.pop_front();
    std::size_t length = std::min<std::size_t>(entry_length, receive.length);
    if (length > 0) std::memcpy(receive.buffer, entry.payload, length);
    completion.kind = CompletionKind::receive;
    completion.context = receive.context;
    completion.buffer = receive.buffer;
    completion.length = length;
  } else {
    log::error("transport", "shm-own ring {} holds an entry of kind {} and length {}: dropped", index,
               static_cast<std::uint32_t>(kind), entry_length);
    ring.head.store(head + 1, std::memory_order_release);
    return Taken::nothing;
  }
  ring.head.store(head + 1, std::memory_order_release);
  return Taken::completion;
}

std::size_t ShmTransport::poll(std::span<Completion> out) noexcept {
  std::size_t count = 0;
  while (count < out.size() && !local_completions_.empty()) {
    out[count++] = local_completions_.front();
    local_completions_.pop_front();
  }
  // The ring count this process created, not the shared header's copy a peer could change.
  auto created = static_cast<std::uint32_t>(ring_broken_.size());
  std::uint32_t rings = std::min(mailbox_->rings_claimed.load(std::memory_order_acquire), created);
  if (rings == 0) return count;
  if (next_ring_ >= rings) next_ring_ = 0;
  std::uint32_t index = next_ring_;  // no division on this path: it runs on every poll
  for (std::uint32_t step = 0; step < rings && count < out.size(); ++step) {
    Ring& ring = *ring_at(mailbox_, index);
    while (count < out.size()) {
      std::uint64_t head = 0;
      RingEntry* entry = ready_entry(ring, index, head);
      Taken taken = entry != nullptr ? take_entry(ring, index, head, *entry, out[count]) : Taken::nothing;
      if (taken == Taken::nothing) break;
      if (taken == Taken::completion) ++count;
    }
    if (++index == rings) index = 0;
  }
  if (++next_ring_ == rings) next_ring_ = 0;
  return count;
}

}  // namespace tether::transport::shm
