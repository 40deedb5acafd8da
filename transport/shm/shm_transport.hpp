// tether's own on-node transport. Every process owns a mailbox (memfd) of rings; a local
// peer maps it through /proc/<pid>/fd/<fd> and pushes messages and write notifications
// into its own ring. Registered memory is described by the memfd behind it (the pool's
// arenas), so an RMA write is the sender's memcpy into its mapping of the target's arena
// and lands without the target's help. Memory outside the arenas (user buffers, user
// files) moves with one process_vm_writev/readv (CMA).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "transport/shm/mailbox.hpp"
#include "transport/transport.hpp"

namespace tether::transport::shm {

// Describes ranges by the memfd behind them: key = fd << 32 | file page of the start,
// or 0 for memory with no shareable file (moved by CMA). Pins nothing. Thread-safe.
class ShmRegistrar final : public Registrar {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "shm"; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length, Access access) override;
  void deregister(const Registration&) noexcept override {}
};

// A peer's file mapped here, by its fd number in the peer.
struct PeerMapping {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
};

struct ShmPeer {
  std::uint32_t pid = 0;
  std::int32_t mailbox_fd = -1;
  MailboxHeader* mailbox = nullptr;  // mapped on first send
  std::size_t mailbox_bytes = 0;     // of that mapping (the peer's header may lie later)
  RingWriter writer;
  std::map<std::int32_t, PeerMapping> files;
};

class ShmTransport final : public Transport {
 public:
  static Expected<std::unique_ptr<Transport>> open();
  ~ShmTransport() override;

  [[nodiscard]] std::string_view name() const noexcept override { return "shm-own"; }
  [[nodiscard]] const Limits& limits() const noexcept override { return limits_; }
  [[nodiscard]] Registrar& registrar() noexcept override { return registrar_; }
  [[nodiscard]] std::span<const std::byte> address() const noexcept override { return address_; }
  [[nodiscard]] Expected<PeerIndex> insert_peer(std::span<const std::byte> address) override;

  [[nodiscard]] Status post_receive(void* buffer, std::size_t length, void* descriptor,
                                    std::uint64_t context) noexcept override;
  [[nodiscard]] Status send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] Status write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                             const RemoteBuffer& target, std::size_t target_offset,
                             std::uint64_t context) noexcept override;
  [[nodiscard]] Status write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                               void* descriptor, const RemoteBuffer& target,
                                               std::size_t target_offset, std::uint64_t notification,
                                               std::uint64_t context) noexcept override;
  [[nodiscard]] Status read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                            const RemoteBuffer& source, std::size_t source_offset,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] std::byte* map_remote(PeerIndex peer, const RemoteBuffer& remote, std::size_t length) noexcept override;
  [[nodiscard]] bool maps_peer_pool(PeerIndex peer) const noexcept override { return peer < peers_.size(); }
  [[nodiscard]] std::size_t poll(std::span<Completion> out) noexcept override;
  [[nodiscard]] bool offer_message_from(PeerIndex peer) noexcept override;
  [[nodiscard]] bool offers_messages_of(PeerIndex peer) const noexcept override { return peer < peers_.size(); }
  // Peers map whole arenas (a key names the memfd): a key is never narrower than one.
  [[nodiscard]] bool checks_remote_keys() const noexcept override { return false; }

 private:
  ShmTransport() = default;
  Expected<void> create_mailbox(std::uint32_t ring_count);

  // Posting (shm_post.cpp).
  bool check_peer(PeerIndex peer) noexcept { return peer < peers_.size() || report_unknown_peer(peer); }
  bool report_unknown_peer(PeerIndex peer) noexcept;  // false, with the error set
  Status attach(ShmPeer& peer) noexcept;
  RingEntry* reserve(ShmPeer& peer, std::size_t payload_bytes, Status& status) noexcept;
  RingEntry* attach_and_reserve(ShmPeer& peer, std::size_t payload_bytes, Status& status) noexcept;
  enum class Direction : std::uint8_t { to_peer, from_peer };
  Status copy_with_peer(ShmPeer& peer, void* local, std::size_t length, const RemoteBuffer& remote, std::size_t offset,
                        Direction direction) noexcept;
  std::byte* peer_bytes(ShmPeer& peer, const RemoteBuffer& remote, std::size_t offset, std::size_t length) noexcept;
  void complete_locally(CompletionKind kind, PeerIndex peer, std::uint64_t context, const void* buffer,
                        std::size_t length);

  // Polling (shm_poll.cpp).
  // in_place: a message the reader took, or a padding entry passed over.
  enum class Taken : std::uint8_t { nothing, completion, in_place };
  // The ring's oldest entry if it is ready, else nullptr (checked on every poll: kept small);
  // `head` is its index, read once.
  RingEntry* ready_entry(Ring& ring, std::uint32_t index, std::uint64_t& head) noexcept;
  struct EntrySnapshot {
    EntryKind kind;
    std::uint16_t flags;
    std::uint32_t length;
    std::uint32_t cells;
  };
  // One read of each field of the entry at `head`: the peer may rewrite it while it is
  // checked. cells is 0 for an entry no ring holds. Inline: poll() runs it per entry.
  [[nodiscard]] static EntrySnapshot snapshot(RingEntry& entry, std::uint64_t head) noexcept {
    EntrySnapshot seen{std::atomic_ref(entry.kind).load(std::memory_order_relaxed),
                       std::atomic_ref(entry.flags).load(std::memory_order_relaxed),
                       std::atomic_ref(entry.length).load(std::memory_order_relaxed), 0};
    seen.cells = entry_cells(seen.kind, seen.length, static_cast<std::uint32_t>(head % kRingCells));
    return seen;
  }
  Taken take_entry(Ring& ring, std::uint32_t index, std::uint64_t head, RingEntry& entry,
                   Completion& completion) noexcept;
  [[gnu::cold]] void report_corrupt_cell(Ring& ring, std::uint32_t index, std::uint64_t head,
                                         std::uint64_t sequence) noexcept;
  [[gnu::cold]] void report_corrupt_entry(Ring& ring, std::uint32_t index, std::uint64_t head, EntryKind kind,
                                          std::uint32_t length) noexcept;
  static void release_cells(Ring& ring, std::uint64_t head, std::uint32_t cells, std::uint16_t flags) noexcept;
  void ignore_corrupt_ring(Ring& ring, std::uint32_t index, std::uint64_t head, std::string_view what) noexcept;
  PeerIndex peer_of_ring(std::uint32_t index) noexcept;
  static constexpr std::uint32_t kNoRing = 0xffffffffU;
  [[gnu::cold]] std::uint32_t find_ring_of_peer(PeerIndex peer) noexcept;

  struct PostedReceive {
    void* buffer;
    std::size_t length;
    std::uint64_t context;
  };

  ShmRegistrar registrar_;
  Limits limits_;
  std::vector<std::byte> address_;
  int mailbox_fd_ = -1;
  MailboxHeader* mailbox_ = nullptr;
  std::size_t mailbox_bytes_ = 0;
  std::size_t streaming_from_ = SIZE_MAX;  // copies to a peer of this many bytes or more stream (peer_copy.hpp)
  std::vector<ShmPeer> peers_;
  std::deque<PostedReceive> receives_;
  std::deque<Completion> local_completions_;
  std::vector<PeerIndex> ring_peers_;      // by ring index, resolved from owner pids
  struct PeerRing {
    std::uint32_t ring = kNoRing;      // the ring it claimed here, once found
    std::uint32_t rings_searched = 0;  // rings claimed when it was last not found
  };
  std::vector<PeerRing> peer_rings_;  // by peer
  std::vector<std::uint8_t> ring_broken_;  // a ring whose indices made no sense: ignored
  std::uint32_t next_ring_ = 0;            // where the next poll starts (fairness)
};

}  // namespace tether::transport::shm
