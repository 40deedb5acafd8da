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

// The ring `peer` claimed in this mailbox (found by its pid among the claimed rings), or
// kNoRing while it has claimed none.
// Searched again only once more rings were claimed.
std::uint32_t ShmTransport::find_ring_of_peer(PeerIndex peer) noexcept {
  if (peer >= peers_.size()) return kNoRing;
  if (peer_rings_.size() < peers_.size()) peer_rings_.resize(peers_.size());
  PeerRing& found = peer_rings_[peer];
  auto created = static_cast<std::uint32_t>(ring_broken_.size());
  std::uint32_t rings = std::min(mailbox_->rings_claimed.load(std::memory_order_acquire), created);
  if (rings == found.rings_searched) return kNoRing;
  found.rings_searched = rings;
  for (std::uint32_t index = 0; index < rings; ++index)
    if (peer_of_ring(index) == peer) return found.ring = index;
  return kNoRing;
}

bool ShmTransport::offer_message_from(PeerIndex peer) noexcept {
  std::uint32_t index = peer < peer_rings_.size() ? peer_rings_[peer].ring : kNoRing;
  if (index == kNoRing) index = find_ring_of_peer(peer);
  if (index == kNoRing || message_reader_ == nullptr) return false;
  Ring& ring = *ring_at(mailbox_, index);
  for (int entries = 0; entries < 2; ++entries) {  // a padding entry, then the message after it
    std::uint64_t head = 0;
    RingEntry* entry = ready_entry(ring, index, head);
    if (entry == nullptr) return false;
    auto [kind, flags, length, cells] = snapshot(*entry, head);
    if (cells == 0) return false;  // poll() reports it
    if (kind == EntryKind::padding) {
      release_cells(ring, head, cells, 0);
      continue;
    }
    if (kind != EntryKind::message || !message_reader_->take({payload_of(*entry), length})) return false;
    release_cells(ring, head, cells, flags);
    return true;
  }
  return false;
}

// A cell at head that holds a later lap's sequence, or an entry no ring holds, means a
// peer wrote the ring or its head: reported once, and the ring is ignored from then on.
void ShmTransport::ignore_corrupt_ring(Ring& ring, std::uint32_t index, std::uint64_t head,
                                       std::string_view what) noexcept {
  ring_broken_[index] = 1;
  log::error("transport", "shm-own ring {} (process {}) has head {} and {}: corrupted; ignored from now on", index,
             ring.owner_pid.load(), head, what);
}

void ShmTransport::report_corrupt_cell(Ring& ring, std::uint32_t index, std::uint64_t head,
                                       std::uint64_t sequence) noexcept {
  ignore_corrupt_ring(ring, index, head, fmt::format("a cell of sequence {}", sequence));
}

void ShmTransport::report_corrupt_entry(Ring& ring, std::uint32_t index, std::uint64_t head, EntryKind kind,
                                        std::uint32_t length) noexcept {
  ignore_corrupt_ring(ring, index, head,
                      fmt::format("an entry of kind {} and length {} at cell {}", static_cast<std::uint32_t>(kind),
                                  length, head % kRingCells));
}

// The cell at head holds this lap's entry when its sequence is head + 1; anything else but
// a later lap's sequence of this cell means not yet (mailbox.hpp).
RingEntry* ShmTransport::ready_entry(Ring& ring, std::uint32_t index, std::uint64_t& head) noexcept {
  if (ring_broken_[index] != 0) return nullptr;
  head = ring.head.load(std::memory_order_relaxed);
  RingEntry& entry = ring.cells[head % kRingCells];
  std::uint64_t sequence = entry.sequence.load(std::memory_order_acquire);
  if (sequence == head + 1) return &entry;
  if (sequence > head + 1 && mimics_sequence(sequence, head)) [[unlikely]]
    report_corrupt_cell(ring, index, head, sequence);
  return nullptr;
}

// Hands an entry's cells back, first zeroing the payload words a flagged entry holds at
// cell starts (they would pass for a later lap's sequence).
void ShmTransport::release_cells(Ring& ring, std::uint64_t head, std::uint32_t cells, std::uint16_t flags) noexcept {
  if ((flags & kEntryClearCells) != 0) [[unlikely]] {
    RingEntry* first = &ring.cells[head % kRingCells];
    for (std::uint32_t cell = 1; cell < cells; ++cell) first[cell].sequence.store(0, std::memory_order_relaxed);
  }
  ring.head.store(head + cells, std::memory_order_release);
}

// Turns a ready entry into a completion, or hands a message to the reader that takes it
// in place; nothing when it must wait (no receive posted) or the ring is corrupt.
ShmTransport::Taken ShmTransport::take_entry(Ring& ring, std::uint32_t index, std::uint64_t head, RingEntry& entry,
                                             Completion& completion) noexcept {
  auto [kind, flags, entry_length, cells] = snapshot(entry, head);
  if (kind == EntryKind::message && cells != 0 && message_reader_ != nullptr &&
      message_reader_->take({payload_of(entry), entry_length})) {
    release_cells(ring, head, cells, flags);
    return Taken::in_place;
  }
  if (cells == 0) [[unlikely]] {
    report_corrupt_entry(ring, index, head, kind, entry_length);
    return Taken::nothing;
  }
  if (kind == EntryKind::padding) {  // the cells after it were not written this lap
    release_cells(ring, head, cells, 0);
    return Taken::in_place;
  }
  completion = Completion{};
  completion.peer = peer_of_ring(index);
  if (kind == EntryKind::remote_write) {
    completion.kind = CompletionKind::remote_write;
    completion.length = entry_length;
    completion.notification = entry.notification;
  } else {
    if (receives_.empty()) return Taken::nothing;  // the sender's ring fills: back-pressure
    PostedReceive receive = receives_.front();
    receives_.pop_front();
    std::size_t length = std::min<std::size_t>(entry_length, receive.length);
    if (length > 0) std::memcpy(receive.buffer, payload_of(entry), length);
    completion.kind = CompletionKind::receive;
    completion.context = receive.context;
    completion.buffer = receive.buffer;
    completion.length = length;
  }
  release_cells(ring, head, cells, flags);
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
