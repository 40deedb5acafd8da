// The shared-memory mailbox a process receives through: one single-producer ring per
// local sender, claimed by the sender's pid on first use. Lives in a memfd the peers map
// through /proc/<pid>/fd/<fd>, so no name is left behind by any exit or crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tether::transport::shm {

inline constexpr std::uint32_t kMailboxMagic = 0x7e5a4d42;  // "te" shared mailbox
// 2: entries carry their sequence; 3: entries packed in 64-byte cells
inline constexpr std::uint32_t kMailboxVersion = 3;
inline constexpr std::size_t kCellBytes = 64;
inline constexpr std::size_t kEntryHeaderBytes = 24;
inline constexpr std::size_t kEntryPayloadBytes = 8192 + 64;  // the default eager size and its header
inline constexpr std::uint32_t kRingCells = 8192;             // 512 KiB a ring; a power of two
// Past this cell the producer goes back to cell 0 when the consumer has caught up enough,
// so a stream of small messages cycles through 64 KiB that stay in cache, while a burst
// of large ones still has the whole ring.
inline constexpr std::uint32_t kRingWarmCells = 1024;
inline constexpr std::uint32_t kWarmEntryCells = 32;  // entries this small go back to cell 0 early
inline constexpr std::uint32_t kMaxEntryCells =
    static_cast<std::uint32_t>((kEntryHeaderBytes + kEntryPayloadBytes + kCellBytes - 1) / kCellBytes);
// Entries of the largest size a ring always holds at once, wherever it starts (a padding
// entry may take up to kMaxEntryCells - 1 cells at its end).
inline constexpr std::uint32_t kRingEntries = (kRingCells - (kMaxEntryCells - 1)) / kMaxEntryCells;

// padding: the cells from this entry to the ring's end are unused (the next entry did not fit)
enum class EntryKind : std::uint16_t { message = 1, remote_write = 2, padding = 3 };
// Entry flag: a word of the payload at the start of a cell looks like a sequence some later
// entry starting in that cell may carry; the consumer zeroes those words as it takes it.
inline constexpr std::uint16_t kEntryClearCells = 1;

// A ring is an array of cells; an entry takes as many consecutive cells as its header and
// payload need (an 8 B message with the engine's header fits one) and never wraps: when
// it would, a padding entry fills the ring's end. An entry's sequence (its cell position
// + 1, stored last with release) says it is ready: the consumer polls the cell at head
// itself. Until then that cell's first word is 0, an earlier lap's (smaller) sequence or
// payload of an earlier lap that no sequence of that cell can equal (sequence - 1 is the
// cell's position, so a word w could only pass in cell (w - 1) % kRingCells): the
// producer flags an entry whose payload holds such a word (kEntryClearCells), and the
// consumer then zeroes it.
struct alignas(64) RingEntry {
  std::atomic<std::uint64_t> sequence;
  EntryKind kind;
  std::uint16_t flags;
  std::uint32_t length;        // payload bytes (message) or bytes written (remote_write)
  std::uint64_t notification;  // remote_write
  std::byte payload_start[kCellBytes - kEntryHeaderBytes];  // the payload runs on into the next cells
};
static_assert(offsetof(RingEntry, payload_start) == kEntryHeaderBytes && sizeof(RingEntry) == kCellBytes);

[[nodiscard]] inline std::byte* payload_of(RingEntry& entry) noexcept {
  return reinterpret_cast<std::byte*>(&entry) + kEntryHeaderBytes;
}
// Whether `word` in the cell at ring position `position` could pass for the sequence of a
// later entry starting in that cell.
[[nodiscard]] constexpr bool mimics_sequence(std::uint64_t word, std::uint64_t position) noexcept {
  return word != 0 && (word - 1) % kRingCells == position % kRingCells;
}
// The flags of a message entry at ring position `position` whose `length` bytes were
// copied from `source`: kEntryClearCells when a word at one of its cell starts would pass
// for a later sequence (read from `source`, or from the ring where the payload covers the
// word only in part).
[[nodiscard]] inline std::uint16_t message_flags(const std::byte* source, std::size_t length, RingEntry& entry,
                                                 std::uint64_t position) noexcept {
  std::uint32_t cell = 1;
  for (std::size_t offset = kCellBytes - kEntryHeaderBytes; offset < length; offset += kCellBytes, ++cell) {
    std::uint64_t word = 0;
    if (offset + sizeof word <= length) std::memcpy(&word, source + offset, sizeof word);
    else word = (&entry)[cell].sequence.load(std::memory_order_relaxed);
    if (mimics_sequence(word, position + cell)) return kEntryClearCells;
  }
  return 0;
}
// Cells an entry of `payload_bytes` takes (a remote_write's payload is 0 bytes).
[[nodiscard]] constexpr std::uint32_t cells_for(std::size_t payload_bytes) noexcept {
  return static_cast<std::uint32_t>((kEntryHeaderBytes + payload_bytes + kCellBytes - 1) / kCellBytes);
}

// Head and tail (cell positions) on their own cache lines: the producer writes tail, the
// consumer head. The consumer finds new entries by their sequence, not by reading tail
// (one line less per message); tail counts what the producer published, for a look at a
// live mailbox.
struct Ring {
  alignas(64) std::atomic<std::uint32_t> owner_pid;  // 0: free
  alignas(64) std::atomic<std::uint64_t> tail;       // cells pushed
  alignas(64) std::atomic<std::uint64_t> head;       // cells taken
  alignas(64) RingEntry cells[kRingCells];
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
// The cells an entry of `kind` and `length` starting at cell `index` takes, or 0 when it
// is not one this ring can hold (unknown kind, a message longer than an entry holds, or
// running past the ring's end): the ring is then corrupt.
[[nodiscard]] inline std::uint32_t entry_cells(EntryKind kind, std::uint32_t length, std::uint32_t index) noexcept {
  std::uint32_t cells = 0;
  if (kind == EntryKind::remote_write) cells = 1;  // length only reports what was written
  else if (kind == EntryKind::padding) cells = kRingCells - index;
  else if (kind == EntryKind::message && length <= kEntryPayloadBytes) cells = cells_for(length);
  return index + cells <= kRingCells ? cells : 0;
}

// The producer's view of one ring.
struct RingWriter {
  Ring* ring = nullptr;
  std::uint64_t tail = 0;
  std::uint64_t cached_head = 0;
  std::uint32_t reserved_cells = 0;
  std::uint64_t next_head_look = 0;  // warm_wrap_fits reads head again from this tail on
  // A free entry for `payload_bytes` (<= kEntryPayloadBytes), or nullptr when the ring is
  // full. It first publishes a padding entry to the ring's end when the entry would wrap,
  // or, for an entry of at most kWarmEntryCells past kRingWarmCells, when the consumer is
  // close behind.
  [[nodiscard]] RingEntry* reserve(std::size_t payload_bytes) noexcept {
    std::uint32_t cells = cells_for(payload_bytes);
    auto index = static_cast<std::uint32_t>(tail % kRingCells);
    bool wrap = index + cells > kRingCells || (cells <= kWarmEntryCells && warm_wrap_fits(index));
    std::uint32_t padding = wrap ? kRingCells - index : 0;
    if (!has_room(padding + cells)) return nullptr;
    if (padding > 0) publish_padding(index, padding);
    reserved_cells = cells;
    return &ring->cells[tail % kRingCells];
  }
  // Makes the entry reserve() gave ready for the consumer (kind, flags, length and payload
  // written).
  void publish(RingEntry& entry) noexcept {
    entry.sequence.store(tail + 1, std::memory_order_release);
    tail += reserved_cells;
    ring->tail.store(tail, std::memory_order_relaxed);
  }

 private:
  // Past kRingWarmCells: whether the consumer is close enough behind to go back to cell 0
  // (further behind, the producer would catch up with it within the warm cells). The
  // consumer's head is a line it writes per entry: looked at again only every kHeadLookCells.
  [[nodiscard]] bool warm_wrap_fits(std::uint32_t index) noexcept {
    constexpr std::uint64_t kHeadLookCells = 256;
    constexpr std::uint64_t kCloseBehindCells = kRingWarmCells / 8;
    if (index < kRingWarmCells) return false;
    if (tail - cached_head <= kCloseBehindCells) return true;
    if (tail < next_head_look) return false;
    next_head_look = tail + kHeadLookCells;
    cached_head = ring->head.load(std::memory_order_acquire);
    return tail - cached_head <= kCloseBehindCells;
  }
  [[nodiscard]] bool has_room(std::uint32_t cells) noexcept {
    if (tail + cells - cached_head <= kRingCells) return true;
    cached_head = ring->head.load(std::memory_order_acquire);
    return tail + cells - cached_head <= kRingCells;
  }
  // The cells it covers keep what earlier laps left, which no later sequence matches.
  void publish_padding(std::uint32_t index, std::uint32_t cells) noexcept {
    RingEntry& entry = ring->cells[index];
    entry.kind = EntryKind::padding;
    entry.flags = 0;
    entry.length = cells;
    reserved_cells = cells;
    publish(entry);
  }
};

}  // namespace tether::transport::shm
