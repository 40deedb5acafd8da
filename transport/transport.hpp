// The transport interface: one domain and one reliable-datagram endpoint per object.
// Backends: transport/ofi (libfabric), transport/verbs (rdma-core), transport/shm
// (shm-own), and transport/hybrid, which routes each peer to a local or network backend.
//
// Not thread-safe: one thread posts and polls at a time. The registrar() is the only
// part that may be called from any thread (the pool grows from any thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "tether/error.hpp"
#include "tether/pool.hpp"

namespace tether::transport {

// A peer as this endpoint names it: 0, 1, 2, ... in the order of insert_peer.
using PeerIndex = std::uint32_t;
inline constexpr PeerIndex kUnknownPeer = 0xffffffffU;
inline constexpr std::size_t kPageBytes = 4096;  // registration and mapping granularity

// How a peer names a registered range of ours (and we name theirs). Plain data: send it
// as bytes. registration_base is the start of the registration, needed by providers that
// address RMA by offset (no FI_MR_VIRT_ADDR).
struct RemoteBuffer {
  std::uint64_t address = 0;            // virtual address of the first byte, owner's view
  std::uint64_t key = 0;                // the registration's remote key
  std::uint64_t registration_base = 0;  // virtual address where the registration starts
  std::uint64_t length = 0;             // bytes from `address` a peer may touch
};

// How far the key a peer is handed for pool memory reaches (TETHER_REMOTE_KEYS).
enum class KeyScope : std::uint8_t {
  exact,      // a registration of just the handed-out range, where the backend checks keys
  arena,      // the key of the whole pool arena holding the range (no registration)
  automatic,  // exact where such a registration pins nothing (software providers), else arena
};

// Keys handed to peers for pool memory, counted by the transport that made them.
struct KeyStats {
  std::uint64_t range_registrations = 0;  // KeyScope::exact: registrations of one handed-out range
  std::uint64_t range_releases = 0;       // of those, released since (the key no longer works)
  std::uint64_t arena_keys = 0;           // arena keys handed out instead (KeyScope::arena, or shm-own)
};

// What Transport counts of KeyStats; ExposedRange counts its own release.
struct KeyCounters {
  std::atomic<std::uint64_t> range_registrations{0};
  std::atomic<std::uint64_t> range_releases{0};
  std::atomic<std::uint64_t> arena_keys{0};
};

// A range of pool memory a peer holds a key to, and the registration made for just that
// range (none when the arena's key was handed out). Move-only; release() or destruction
// closes the registration, after which a peer's RMA with the key fails at the peer.
class ExposedRange {
 public:
  ExposedRange() = default;
  explicit ExposedRange(const RemoteBuffer& remote) noexcept : remote_(remote) {}
  ExposedRange(const RemoteBuffer& remote, Registrar& registrar, const Registration& registration,
               KeyCounters& counters) noexcept
      : remote_(remote), registrar_(&registrar), registration_(registration), counters_(&counters) {}
  ExposedRange(ExposedRange&& other) noexcept { take(other); }
  ExposedRange& operator=(ExposedRange&& other) noexcept;
  ExposedRange(const ExposedRange&) = delete;
  ExposedRange& operator=(const ExposedRange&) = delete;
  ~ExposedRange() { release(); }

  // What the peer is told; empty (length 0) once released or when default-made.
  [[nodiscard]] const RemoteBuffer& remote() const noexcept { return remote_; }
  // The key is this range's own registration (false: the arena's key, or nothing).
  [[nodiscard]] bool has_own_registration() const noexcept { return registrar_ != nullptr; }
  // Inline: every request's completion releases its range, and most never held one.
  void release() noexcept {
    remote_ = {};
    if (registrar_ != nullptr) close_registration();
  }

 private:
  void take(ExposedRange& other) noexcept;
  void close_registration() noexcept;

  RemoteBuffer remote_{};
  Registrar* registrar_ = nullptr;
  Registration registration_{};
  KeyCounters* counters_ = nullptr;
};

enum class CompletionKind : std::uint8_t {
  send_done,     // a posted send finished; its buffer may be reused
  receive,       // a message landed in a posted receive buffer
  write_done,    // a posted RMA write finished locally
  remote_write,  // a peer's write with notification landed in our memory
  read_done,     // a posted RMA read landed in our buffer
  error,         // an operation failed: see failed_kind, error, cause
};

struct Completion {
  CompletionKind kind = CompletionKind::error;
  CompletionKind failed_kind = CompletionKind::error;  // for errors: what had been expected
  Errc error = Errc::ok;
  PeerIndex peer = kUnknownPeer;  // source (receive, remote_write) or target of the operation
  std::uint64_t context = 0;      // what the caller passed when posting
  void* buffer = nullptr;         // receive: the posted buffer; others: local buffer
  std::size_t length = 0;         // bytes received, written or read
  std::uint64_t notification = 0; // remote_write: the 64-bit value the writer attached
  int provider_errno = 0;         // errors: the provider's code (positive)
  const char* cause = "";         // errors: static text naming the cause
};

// What the endpoint can do; sizes above these must be split by the caller (rendezvous).
struct Limits {
  std::size_t max_message_bytes = 0;
  std::size_t max_rma_bytes = 0;  // 0: no limit
  std::size_t inject_bytes = 0;  // sends this small complete at once: done, retry or error, never posted
  std::size_t send_queue_depth = 0;
  std::size_t receive_queue_depth = 0;
};

struct OpenOptions {
  std::string provider;  // ofi: libfabric provider ("shm", "tcp;ofi_rxm"); "" = config
  std::string domain;    // ofi: fabric domain ("lo", "mlx5_0"); verbs: device; "" = config
  std::string node;      // hybrid: this process's node, as peers compare it; "" = hybrid::node_identity()
  std::string notify;    // ofi: "auto", "cq-data" or "send" (see TETHER_OFI_NOTIFY); "" = config
};

// Takes a message where the transport holds it (its length within the transport's limit,
// its bytes unchecked and writable by the peer), or declines it: it then goes to a posted
// receive as usual.
class MessageReader {
 public:
  [[nodiscard]] virtual bool take(std::span<const std::byte> message) noexcept = 0;

 protected:
  ~MessageReader() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // "ofi:shm", "ofi:tcp;ofi_rxm", "verbs:mlx5_0".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  // The backend that carries traffic to `peer` (differs from name() for hybrid).
  [[nodiscard]] virtual std::string_view peer_transport_name(PeerIndex) const noexcept { return name(); }
  [[nodiscard]] virtual const Limits& limits() const noexcept = 0;
  // Registers memory with this domain (fi_mr_reg / ibv_reg_mr). Thread-safe.
  [[nodiscard]] virtual Registrar& registrar() noexcept = 0;

  // This endpoint's address, to hand to peers (through PMIx, a pipe, ...).
  [[nodiscard]] virtual std::span<const std::byte> address() const noexcept = 0;
  [[nodiscard]] virtual Expected<PeerIndex> insert_peer(std::span<const std::byte> address) = 0;

  // Hot path. `descriptor` may be nullptr for pool memory (found through pool_find) and
  // for providers that need no local descriptor. Status::done: finished now, no
  // completion follows; posted: a completion follows; retry: queue full, poll and
  // repeat; error: see last_error().
  [[nodiscard]] virtual Status post_receive(void* buffer, std::size_t length, void* descriptor,
                                            std::uint64_t context) noexcept = 0;
  [[nodiscard]] virtual Status send(PeerIndex peer, const void* buffer, std::size_t length,
                                    void* descriptor, std::uint64_t context) noexcept = 0;
  [[nodiscard]] virtual Status write(PeerIndex peer, const void* buffer, std::size_t length,
                                     void* descriptor, const RemoteBuffer& target,
                                     std::size_t target_offset, std::uint64_t context) noexcept = 0;
  // Like write; the target then polls a remote_write completion carrying `notification`.
  [[nodiscard]] virtual Status write_with_notification(PeerIndex peer, const void* buffer,
                                                       std::size_t length, void* descriptor,
                                                       const RemoteBuffer& target,
                                                       std::size_t target_offset,
                                                       std::uint64_t notification,
                                                       std::uint64_t context) noexcept = 0;
  [[nodiscard]] virtual Status read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                                    const RemoteBuffer& source, std::size_t source_offset,
                                    std::uint64_t context) noexcept = 0;
  // Where `length` bytes of the peer's `remote` buffer appear in this process, for
  // backends that map peers' memory (shm-own, pool memory only); nullptr otherwise.
  // Stores there land without any operation or completion; the caller orders them.
  [[nodiscard]] virtual std::byte* map_remote(PeerIndex, const RemoteBuffer&, std::size_t) noexcept { return nullptr; }
  // Whether map_remote maps `peer`'s pool memory (known before any RemoteBuffer is). It
  // may still return nullptr (user memory, a failed mapping): callers fall back to RMA.
  [[nodiscard]] virtual bool maps_peer_pool(PeerIndex) const noexcept { return false; }
  // Fills `out` with finished operations; returns how many. Drives progress.
  [[nodiscard]] virtual std::size_t poll(std::span<Completion> out) noexcept = 0;
  // Where messages arrive in memory this process can read in place (shm-own's rings),
  // poll() first offers each to `reader`, in arrival order; one it takes leaves no
  // completion and uses no posted receive. The reader must not call the transport.
  // nullptr (the default) stops it; other transports ignore it.
  virtual void read_messages_in_place(MessageReader* reader) noexcept { message_reader_ = reader; }
  // Offers the reader only the oldest message from `peer`, if one is ready (passing over a
  // ring's padding): true when the reader took it. A waiter that only that peer can answer
  // looks there without a whole poll(). Only where offers_messages_of(peer) is true.
  [[nodiscard]] virtual bool offer_message_from(PeerIndex) noexcept { return false; }
  [[nodiscard]] virtual bool offers_messages_of(PeerIndex) const noexcept { return false; }

  // Why the last post call returned Status::error.
  [[nodiscard]] const Error& last_error() const noexcept { return last_error_; }

  // Registers every pool arena with this domain (now and as the pool grows), so pool
  // buffers need no descriptor. Undone by detach_pool() or destruction.
  [[nodiscard]] virtual Expected<void> attach_pool();
  virtual void detach_pool() noexcept;
  [[nodiscard]] int pool_slot() const noexcept { return pool_slot_; }

  // How peers name [address, address + length) inside `registration`.
  [[nodiscard]] static RemoteBuffer describe(const Registration& registration, const void* address,
                                             std::size_t length) noexcept;
  // The same for a pool buffer, once attach_pool() succeeded.
  [[nodiscard]] Expected<RemoteBuffer> describe_pool_buffer(const void* address,
                                                            std::size_t length) const;
  // What `peer` must be told: the same as describe / describe_pool_buffer except where
  // peers reach us through different backends (hybrid). `registration` comes from
  // this transport's registrar().
  [[nodiscard]] virtual RemoteBuffer describe_for(PeerIndex, const Registration& registration, const void* address,
                                                  std::size_t length) const noexcept {
    return describe(registration, address, length);
  }
  [[nodiscard]] virtual Expected<RemoteBuffer> describe_pool_buffer_for(PeerIndex, const void* address,
                                                                        std::size_t length) const {
    return describe_pool_buffer(address, length);
  }

  // Hands `peer` a key to [address, address + length) of pool memory with `access`
  // (Access::remote_write for landing ranges, remote_read for a get's source). With
  // KeyScope::exact on a backend that checks keys, the key is a registration of just
  // that range (byte-exact, not page-rounded; the memory is already pinned); otherwise
  // the arena's key. Errc::not_from_pool when the range is not inside one pool arena
  // attached to this transport. Setup path: it may register memory.
  [[nodiscard]] virtual Expected<ExposedRange> expose_pool_range(PeerIndex peer, const void* address,
                                                                 std::size_t length, Access access, KeyScope scope);
  // Whether the target checks a peer's RMA against the key's range. false for backends
  // that map pool arenas into their peers (shm-own): there a peer reaches whole arenas.
  [[nodiscard]] virtual bool checks_remote_keys() const noexcept { return true; }
  // Whether registering a range of already pinned memory is cheap (a software provider's
  // map insert) rather than a pinning call of microseconds (verbs, hardware providers).
  [[nodiscard]] virtual bool range_keys_are_cheap() const noexcept { return false; }
  // Whether a small message to `peer` arrives sooner as a send than as an RMA write with
  // notification: true on software providers (tcp;ofi_rxm, libfabric shm), whose writes
  // cost an extra acknowledgement; false where the NIC does RDMA.
  [[nodiscard]] virtual bool sends_beat_small_writes(PeerIndex) const noexcept { return false; }
  // Whether the target sees `peer`'s messages and write notifications in the order they
  // were posted (one stream: tcp-own). Persistent channels then let the sender pick each
  // message's landing slot (persist/README.md).
  [[nodiscard]] virtual bool delivers_in_order(PeerIndex) const noexcept { return false; }
  // Sends reported done that still wait in this process for progress to move them out (a
  // connection still opening, a full socket): a caller about to stop calling the runtime
  // for a while (another library's collective) progresses until this is false.
  [[nodiscard]] virtual bool holds_unsent() const noexcept { return false; }
  [[nodiscard]] virtual KeyStats key_stats() const noexcept;

 protected:
  Transport() = default;
  // The local descriptor of pool memory at `address`, or nullptr.
  [[nodiscard]] void* pool_descriptor(const void* address) const noexcept;
  Status fail(Errc code, std::string cause, std::string remedy, int sys_errno = 0) noexcept;

  Error last_error_;
  MessageReader* message_reader_ = nullptr;
  int pool_slot_ = -1;
  KeyCounters key_counters_;
};

// Opens a domain and endpoint. `spec`: "ofi" (provider from TETHER_OFI_PROVIDER),
// "ofi:shm", "ofi:tcp" (tcp;ofi_rxm), "ofi:<libfabric provider>", "verbs", "shm-own",
// "tcp-own" or "tcp-own:<interface>", "hybrid" (peers on this node over
// TETHER_SHM_TRANSPORT, others over network_spec()).
[[nodiscard]] Expected<std::unique_ptr<Transport>> open_transport(std::string_view spec,
                                                                  const OpenOptions& options = {});

// The network backend TETHER_NET_TRANSPORT picks here: "tcp-own" or "ofi".
[[nodiscard]] std::string network_spec();

// What `open_transport("ofi")` would pick here and why, for tether-info -v.
[[nodiscard]] std::string describe_ofi_choice();

// Registers the whole pages that hold [address, address + bytes) (registrars take
// page-aligned ranges).
[[nodiscard]] Expected<Registration> register_pages(Registrar& registrar, const void* address, std::size_t bytes);

// The round trip of a RemoteBuffer as bytes (fixed 32 bytes, little-endian host order).
[[nodiscard]] std::vector<std::byte> to_bytes(const RemoteBuffer& buffer);
[[nodiscard]] Expected<RemoteBuffer> remote_buffer_from_bytes(std::span<const std::byte> bytes);

}  // namespace tether::transport
