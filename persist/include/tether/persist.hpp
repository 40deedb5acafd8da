// Persistent channels: pin once, handshake once, then every message is one RDMA write
// into the receiver's next free slot (or, for small messages on software providers such
// as tcp, one send straight from the buffer), with credits so no unconsumed slot is
// overwritten.
//
//   auto out = tether::SendChannel::create(runtime, {.peer = 1, .tag = 7, .slot_bytes = 4096});
//   auto in  = tether::ReceiveChannel::create(runtime, {.peer = 0, .tag = 7, .slot_bytes = 4096});
//   out->wait_connected();                 // the one handshake (both sides)
//   std::span<std::byte> b = out->buffer(); fill(b); out->start(n); out->wait();
//   std::span<const std::byte> m; in->wait(m); use(m); in->release();
//
// The k-th send channel a rank creates for (peer, tag) pairs with the k-th receive
// channel that peer creates for (this rank, tag). A channel belongs to one thread at a
// time; destroy every channel before its Runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tether/error.hpp"
#include "tether/runtime.hpp"

namespace tether {

namespace persist {
struct ChannelState;
class ChannelRegistry;
}  // namespace persist
class ReceiveChannel;

// What both sides of a channel must agree on (creation fails on both sides otherwise).
struct ChannelShape {
  int peer = -1;                // the other side's rank (may be this rank)
  int tag = 0;                  // 0 .. kMaxChannelTag
  std::size_t slot_bytes = 0;   // the largest message
  std::uint32_t slots = 2;      // messages that may be in flight (receiver's landing slots)
  std::uint32_t partitions = 1; // > 1: partitioned messages of slot_bytes / partitions each
};

inline constexpr int kMaxChannelTag = (1 << 29) - 1;
inline constexpr std::uint32_t kMaxChannelSlots = 1024;
inline constexpr std::uint32_t kMaxChannelPartitions = 65536;
// Where the receiver's slots are mapped (shm-own), a message of at most this many bytes
// travels in the line that announces it (ChannelStats::flag_line_messages).
inline constexpr std::size_t kFlagLineMessageBytes = 48;

// Counters of one Runtime's channels, to prove what the hot path does not do.
struct ChannelStats {
  std::uint64_t channels_created = 0;
  std::uint64_t handshake_messages = 0;  // hellos sent (one per channel)
  std::uint64_t user_registrations = 0;  // user buffers registered (once per channel)
  std::uint64_t user_registrations_held = 0;  // of those, still held: open channels, and closed
                                              // ones until their writes in flight end
  std::uint64_t key_registrations = 0;   // pool ranges registered for the peer's key alone
                                         // (TETHER_REMOTE_KEYS=exact): slots and flags, or credit word
  std::uint64_t data_writes = 0;         // RDMA writes of messages or partitions
  std::uint64_t credit_writes = 0;       // RDMA writes returning credits
  std::uint64_t data_messages = 0;       // messages sent as one send from the buffer (small
                                         // messages where sends beat writes; no copy)
  std::uint64_t credit_messages = 0;     // messages returning credits alone
  std::uint64_t piggybacked_credits = 0; // credit returns that rode on a data message (or, on
                                         // shm-own, in a direct store's flag line)
  std::uint64_t send_copies = 0;         // memcpy on a send path (channels to self only)
  std::uint64_t rejected_notifications = 0;  // malformed or unexpected, dropped and logged
  std::uint64_t late_notifications = 0;      // for channels closed since, dropped
  std::uint64_t direct_stores = 0;       // of data_writes, stores into the receiver's mapped slot
                                         // (shm-own): no completion, no notification
  std::uint64_t flag_line_messages = 0;  // of direct_stores, messages of <= kFlagLineMessageBytes
                                         // carried in the receiver's flag line (one cache line crosses)
  std::uint64_t sender_picked_slots = 0; // messages whose landing slot the sender picked from the
                                         // free ones, released last first (direct stores; writes
                                         // and sends over tcp-own), not by turn
  std::uint64_t warm_slot_waits = 0;     // direct stores too large for slots rotating in L2 that
                                         // first waited (briefly) for the slot the last message took
  std::uint64_t credit_stores = 0;       // stores of the released count into the sender's
                                         // mapped credit word (shm-own), when none rode on a store
  std::uint64_t streamed_stores = 0;     // of direct_stores, copied with non-temporal stores
                                         // (TETHER_SHM_STREAMING_COPY)
  std::uint64_t split_copies = 0;        // of direct_stores, messages the receiver could help
                                         // copy (TETHER_CHANNEL_SPLIT_COPY)
  std::uint64_t pieces_sender_copied = 0;    // pieces of split copies this side copied as sender
  std::uint64_t pieces_receiver_copied = 0;  // and as receiver, from the sender's mapped buffer
};
[[nodiscard]] ChannelStats channel_stats(Runtime& runtime);

class SendChannel {
 public:
  // Message buffers come from the pinned pool (one per slot; one where the transport maps
  // the peer's memory, shm-own, since the message is copied at start(), or, split, by
  // start() and the receiver until the send completes).
  static Expected<SendChannel> create(Runtime& runtime, const ChannelShape& shape);
  // Messages are sent from `user_buffer` (>= slot_bytes), registered once through a
  // registration cache; one message is in flight from it at a time.
  static Expected<SendChannel> create(Runtime& runtime, const ChannelShape& shape, std::span<std::byte> user_buffer);

  SendChannel(SendChannel&& other) noexcept;
  SendChannel& operator=(SendChannel&& other) noexcept;
  SendChannel(const SendChannel&) = delete;
  SendChannel& operator=(const SendChannel&) = delete;
  // Waits briefly for writes in flight (reports and leaks what is left), then tells the
  // receiver's side, which fails with peer_closed once it took every message started.
  ~SendChannel();

  // done once the handshake finished, posted while it runs, error on a mismatch or a
  // dead peer (last_error() names both sides' values), or Errc::timeout once the peer created
  // no matching channel within TETHER_CHANNEL_CONNECT_TIMEOUT of this one's creation; then
  // start(), test() and wait() say so too (the channel may still connect later).
  // wait_connected() gives the handshake the whole timeout from its call.
  [[nodiscard]] Status test_connected() noexcept;
  [[nodiscard]] Expected<void> wait_connected();

  // Where the next message is produced. Fill it only when next_buffer() said done (or
  // after wait()): until then a write from it may still be in flight. Partitioned
  // channels: after start(), the started message's until every partition is ready.
  [[nodiscard]] std::span<std::byte> buffer() const noexcept;
  [[nodiscard]] Status next_buffer(std::span<std::byte>& buffer) noexcept;
  // next_buffer() until it says done or error, giving the CPU away as wait() does. With
  // several buffers (tcp, libfabric) the next may be free while the last write is still
  // unanswered: cheaper than wait() before producing the next message.
  [[nodiscard]] Status wait_buffer(std::span<std::byte>& buffer) noexcept;

  // One RDMA write of buffer()[0, bytes) into the receiver's next slot (or one send of
  // it, see TETHER_CHANNEL_INLINE_MAX). posted, or done when the bytes already left the
  // buffer; retry when no credit, the buffer is busy or the handshake runs (progress and call again);
  // error for bytes > slot_bytes, a failed channel, a receiver that closed its side
  // (peer_closed) or one never created (timeout, see test_connected()). Partitioned
  // channels: starts a message whose partitions go out with ready().
  [[nodiscard]] Status start(std::size_t bytes) noexcept;
  // Partitioned channels: partition `index` of the started message is ready; written now.
  [[nodiscard]] Status ready(std::uint32_t index) noexcept;
  // done when every started message left this side (its buffer may be refilled).
  [[nodiscard]] Status test() noexcept;
  [[nodiscard]] Status wait() noexcept;

  [[nodiscard]] const ChannelShape& shape() const noexcept;
  [[nodiscard]] const Error& last_error() const noexcept;

 private:
  SendChannel(persist::ChannelRegistry* registry, persist::ChannelState* state) noexcept
      : registry_(registry), state_(state) {}
  friend Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives);
  persist::ChannelRegistry* registry_ = nullptr;
  persist::ChannelState* state_ = nullptr;
};

class ReceiveChannel {
 public:
  // Landing slots come from the pinned pool.
  static Expected<ReceiveChannel> create(Runtime& runtime, const ChannelShape& shape);
  // Landing slots are `user_slots` (>= slots x slot_bytes), registered once.
  static Expected<ReceiveChannel> create(Runtime& runtime, const ChannelShape& shape, std::span<std::byte> user_slots);

  ReceiveChannel(ReceiveChannel&& other) noexcept;
  ReceiveChannel& operator=(ReceiveChannel&& other) noexcept;
  ReceiveChannel(const ReceiveChannel&) = delete;
  ReceiveChannel& operator=(const ReceiveChannel&) = delete;
  // Its slots stay reserved while the sender may still write (pool slots until the runtime
  // ends; user slots: the destructor waits until the sender acknowledged the close, at most
  // TETHER_CHANNEL_CLOSE_TIMEOUT); the sender's side is told and fails its next start()
  // with peer_closed.
  ~ReceiveChannel();

  [[nodiscard]] Status test_connected() noexcept;
  [[nodiscard]] Expected<void> wait_connected();

  // done: `message` views the next message (in send order) where it landed; it stays
  // valid until release(). posted: nothing new yet. error: the channel failed, its sender
  // closed its side and every message it started was taken (peer_closed), or the sender
  // created no matching channel in time (timeout, see SendChannel::test_connected()).
  [[nodiscard]] Status test(std::span<const std::byte>& message) noexcept;
  [[nodiscard]] Status wait(std::span<const std::byte>& message) noexcept;
  // Partitioned channels: whether partition `index` of the next message has landed
  // (false while every slot is held: it has nowhere to land); true once the channel failed
  // or its sender closed before that message, and test() or wait() then give the error.
  // Always false on a channel without partitions: test() says whether its next message landed.
  [[nodiscard]] bool arrived(std::uint32_t index) noexcept;
  // Hands the oldest message's slot back to the sender (a credit).
  [[nodiscard]] Status release() noexcept;

  [[nodiscard]] const ChannelShape& shape() const noexcept;
  [[nodiscard]] const Error& last_error() const noexcept;

 private:
  ReceiveChannel(persist::ChannelRegistry* registry, persist::ChannelState* state) noexcept
      : registry_(registry), state_(state) {}
  friend Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives);
  persist::ChannelRegistry* registry_ = nullptr;
  persist::ChannelState* state_ = nullptr;
};

// Every channel's handshake, in any order (no deadlock whatever order both sides used);
// timeout (naming a channel still waiting) TETHER_CHANNEL_CONNECT_TIMEOUT after the call.
[[nodiscard]] Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives);
// start(bytes[i]) on every channel, retrying back-pressure; error as soon as one fails
// (that channel's last_error() says why; others, before or after it in the list, may have
// started: channels without credit are passed over and tried again).
// bytes (messages) must hold one entry per channel: error (logged), nothing done, if not.
[[nodiscard]] Status start_all(std::span<SendChannel*> channels, std::span<const std::size_t> bytes) noexcept;
[[nodiscard]] Status wait_all(std::span<SendChannel*> channels) noexcept;
// The next message of every channel into messages[i].
[[nodiscard]] Status wait_all(std::span<ReceiveChannel*> channels, std::span<std::span<const std::byte>> messages) noexcept;

}  // namespace tether
