// The shared-memory mailbox a process receives through: one single-producer ring per
// local sender, claimed by the sender's pid on first use. Lives in a memfd the peers map
// through /proc/<pid>/fd/<fd>, so no name is left behind by any exit or crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tether::transport::shm {

inline constexpr std::uint32_t kMailboxMagic = 0x7e5a4d42;  // "te" shared mailbox
inline constexpr std::uint32_t kMailboxVersion = 2;  // 2: entries carry their sequence
inline constexpr std::uint32_t kRingEntries = 64;
inline constexpr std::size_t kEntryPayloadBytes = 8192 + 64;  // the default eager size and its header

enum class EntryKind : std::uint32_t { message = 1, remote_write = 2 };

// An entry starts a cache line, and its sequence (its position in the ring + 1, stored last
// with release) says it is ready: the consumer polls the entry itself, so a small message
// (up to 40 bytes of payload) arrives in the one line it polls.
struct alignas(64) RingEntry {
  std::atomic<std::uint64_t> sequence;
  EntryKind kind;
  std::uint32_t length;        // payload bytes (message) or bytes written (remote_write)
  std::uint64_t notification;  // remote_write
  std::byte payload[kEntryPayloadBytes];
};
static_assert(offsetof(RingEntry, payload) == 24);

// Head and tail on their own cache lines: the producer writes tail, the consumer head.
// The consumer finds new entries by their sequence, not by reading tail (one line less per
// message); tail counts what the producer published, for a look at a live mailbox.
struct Ring {
  alignas(64) std::atomic<std::uint32_t> owner_pid;  // 0: free
  alignas(64) std::atomic<std::uint64_t> tail;       // entries pushed
  alignas(64) std::atomic<std::uint64_t> head;       // entries taken
  alignas(64) RingEntry entries[kRingEntries];
};

struct MailboxHeader {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t ring_count;
  std::uint32_t owner_pid;
  alignas(64) std::atomic<std::uint32_t> rings_claimed;  // high-water index + 1
};

[[nodiscard]] inline std::size_t mailbox_bytes(std::uint32_t ring_count) noexcept {
  return sizeof(MailboxHeader) + static_cast<std::size_t>(ring_count) * sizeof(Ring);
}
[[nodiscard]] inline Ring* ring_at(MailboxHeader* mailbox, std::uint32_t index) noexcept {
  return reinterpret_cast<Ring*>(reinterpret_cast<std::byte*>(mailbox) + sizeof(MailboxHeader)) + index;
}

// Claims a free ring among the first `ring_count` for `pid`; nullptr when every ring is
// taken. `ring_count` is the value checked against the mapping's size, never re-read from
// the shared header, which its owner may change at any time.
[[nodiscard]] Ring* claim_ring(MailboxHeader* mailbox, std::uint32_t ring_count, std::uint32_t pid) noexcept;

// Checks of what a peer writes into shared memory; the reader copies each field once
// and checks the copy, so a peer that keeps writing cannot change it after the check.
// False for an entry to drop: unknown kind, or a message longer than an entry holds.
[[nodiscard]] inline bool entry_valid(EntryKind kind, std::uint32_t length) noexcept {
  if (kind == EntryKind::remote_write) return true;  // length only reports what was written
  return kind == EntryKind::message && length <= kEntryPayloadBytes;
}

// The producer's view of one ring.
struct RingWriter {
  Ring* ring = nullptr;
  std::uint64_t tail = 0;
  std::uint64_t cached_head = 0;
  // A free entry to fill, or nullptr when the ring is full.
  [[nodiscard]] RingEntry* reserve() noexcept {
    if (tail - cached_head >= kRingEntries) {
      cached_head = ring->head.load(std::memory_order_acquire);
      if (tail - cached_head >= kRingEntries) return nullptr;
    }
    return &ring->entries[tail % kRingEntries];
  }
  // Makes the entry reserve() gave ready for the consumer.
  void publish(RingEntry& entry) noexcept {
    entry.sequence.store(++tail, std::memory_order_release);
    ring->tail.store(tail, std::memory_order_relaxed);
  }
};

}  // namespace tether::transport::shm
