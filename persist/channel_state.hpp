// One channel's state, its handshake message and the 64-bit notifications its writes
// carry. Everything here is touched only under the engine's progress lock, except
// `stores_show_in_flags` (std::atomic_ref) and the phase checks before a call takes it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tether/persist.hpp"
#include "tether/rcache.hpp"
#include "transport/transport.hpp"

namespace tether::persist {

enum class Role : std::uint8_t { send = 1, receive = 2 };
inline const char* role_name(Role role) noexcept { return role == Role::send ? "send" : "receive"; }
enum class Phase : std::uint8_t { connecting, ready, failed };
// How a receiver finds a message's slot: by its position (sequence % slots, or the slot a
// direct store names) or in arrival order with the slot the sender named (a transport that
// delivers in order).
enum class LandingOrder : std::uint8_t { by_position = 0, by_arrival = 1 };

inline constexpr std::uint16_t kHelloMagic = 0x7e43;  // "te" + channel
// 2: accepts_message_bytes; 3: direct stores name their slot; 4: landing_order;
// 5: direct stores of up to kFlagInlineBytes travel in their flag line;
// 6: a flag line may carry credits of a send channel of its reader; 7: a send channel
// names its buffer (`source`) and large direct stores may be split copies
inline constexpr std::uint8_t kHelloVersion = 7;

// The one handshake message each side sends when its channel is created. Append fields,
// never reorder.
struct ChannelHello {
  std::uint16_t magic = kHelloMagic;
  std::uint8_t version = kHelloVersion;
  Role role = Role::send;           // of the side that sent it
  std::uint32_t channel_id = 0;     // the sender's id: notifications to it name this
  std::int32_t tag = 0;
  std::uint32_t slots = 0;
  std::uint64_t slot_bytes = 0;
  std::uint32_t partitions = 0;
  std::uint32_t accepts_message_bytes = 0;  // largest channel message payload this side takes (0: RMA only)
  transport::RemoteBuffer landing{};  // receive side: its slots; send side: its credit word
  transport::RemoteBuffer flags{};    // receive side: one flag line per slot (direct writes)
  LandingOrder landing_order = LandingOrder::by_position;  // both sides must agree
  std::uint8_t reserved[7] = {};
  transport::RemoteBuffer source{};   // send side, direct path: its buffer (split copies); else empty
};
static_assert(sizeof(ChannelHello) == 136);

// Direct path (a transport that maps the peer's pool memory, shm-own): the sender copies
// into a free slot of its choice (the one released last: still in cache), writes that
// slot's index into word 1 of the flag line of the message's position (sequence % slots),
// then stores (sequence + 1) << 32 | length into word 0; the receiver sees it without any
// completion. A message of at most kFlagInlineBytes travels in words 2-7 of that line
// instead (word 1 also carries kSlotInline) and the receiver copies it into the slot: one
// cache line crosses, not two. Credits: the receiver stores its cumulative released count
// into the sender's credit word, or carries it in the flag line of its next direct store
// to that rank (below).
inline constexpr std::size_t kFlagStride = 64;
inline constexpr std::size_t kCreditLineBytes = 64;
// Room before each send buffer for a channel message's header (messaging::kChannelHeaderBytes).
inline constexpr std::size_t kInlineRoom = 64;
[[nodiscard]] inline std::uint64_t* flag_at(std::byte* flags, std::uint32_t position) noexcept {
  return reinterpret_cast<std::uint64_t*>(flags + static_cast<std::size_t>(position) * kFlagStride);
}
[[nodiscard]] inline std::uint64_t* landing_slot_at(std::byte* flags, std::uint32_t position) noexcept {
  return flag_at(flags, position) + 1;
}
inline constexpr std::size_t kFlagInlineBytes = kFlagStride - 2 * sizeof(std::uint64_t);
static_assert(kFlagInlineBytes == kFlagLineMessageBytes);
[[nodiscard]] inline std::byte* inline_payload_at(std::byte* flags, std::uint32_t position) noexcept {
  return reinterpret_cast<std::byte*>(flag_at(flags, position) + 2);
}
inline constexpr std::uint32_t kMaxChannelId = (1U << 19) - 1;  // notifications and flag lines carry 19 bits

// Word 1 holds kSlotWritten | slot (bits 0-11): a flag line no direct store wrote (all
// zero) never passes for one, even when the 32-bit sequence in word 0 wraps to 0.
inline constexpr std::uint64_t kSlotMask = 0xfff;
inline constexpr std::uint64_t kSlotWritten = std::uint64_t{1} << 32;
inline constexpr std::uint64_t kSlotInline = std::uint64_t{1} << 33;
static_assert(kMaxChannelSlots <= kSlotMask);

// Split copy (TETHER_CHANNEL_SPLIT_COPY): a large direct store announces its message in the
// flag line before its bytes are in the slot (word 1 carries kSlotSplit). The sender and a
// receiver that waits for the message then take pieces of kSplitPieceBytes in turn: word 2
// counts the pieces taken, word 3 the pieces copied; the message is complete once all are.
// The receiver copies from the sender's buffer (mapped through the hello's `source`) into
// its own slot, so two cores move the bytes and half land in the reader's cache.
inline constexpr std::uint64_t kSlotSplit = std::uint64_t{1} << 31;
inline constexpr std::size_t kSplitPieceBytes = 64 * 1024;
[[nodiscard]] constexpr std::uint64_t split_pieces(std::size_t bytes) noexcept {
  return (bytes + kSplitPieceBytes - 1) / kSplitPieceBytes;
}
[[nodiscard]] inline std::uint64_t* split_pieces_taken_at(std::byte* flags, std::uint32_t position) noexcept {
  return flag_at(flags, position) + 2;
}
[[nodiscard]] inline std::uint64_t* split_pieces_copied_at(std::byte* flags, std::uint32_t position) noexcept {
  return flag_at(flags, position) + 3;
}
// One side's share of the split copy of a `length`-byte message announced in the flag line
// at `position`: takes pieces in turn with the other side until none is left, at most
// every piece (a peer that winds word 2 back cannot keep this side copying), calls
// copy(offset, bytes) for each and counts it copied. Returns how many pieces it copied.
template <class Copy>
std::uint64_t copy_split_share(std::byte* flags, std::uint32_t position, std::size_t length, Copy&& copy) noexcept {
  std::uint64_t pieces = split_pieces(length);
  std::atomic_ref taken(*split_pieces_taken_at(flags, position));
  std::atomic_ref copied(*split_pieces_copied_at(flags, position));
  std::uint64_t mine = 0;
  while (mine < pieces && taken.load(std::memory_order_relaxed) < pieces) {
    std::uint64_t piece = taken.fetch_add(1, std::memory_order_relaxed);
    if (piece >= pieces) break;
    std::size_t offset = piece * kSplitPieceBytes;
    copy(offset, std::min(kSplitPieceBytes, length - offset));
    copied.fetch_add(1, std::memory_order_release);
    ++mine;
  }
  return mine;
}
// Word 1 may also carry credits for a send channel of the line's reader: that channel's
// id (bits 12-30; 0: none) and the cumulative released count of the writer's receive
// channel from it, modulo 2^30 (bits 34-63). A reply (ping-pong, halo exchange) so brings
// the credit in the line its reader fetches anyway: no credit word crosses, and no lock
// waits for one. A send channel that finds no credit also looks at the lines from that
// rank not read yet (acknowledgements read after a burst of sends).
struct CarriedCredits {
  std::uint32_t channel_id = 0;    // the reader's send channel; 0: nothing carried
  std::uint32_t released_low = 0;  // released count modulo kCarriedCountModulus
};
inline constexpr unsigned kCarriedIdShift = 12;
inline constexpr unsigned kCarriedCountShift = 34;
inline constexpr std::uint64_t kCarriedCountModulus = std::uint64_t{1} << 30;
[[nodiscard]] constexpr std::uint64_t carry_bits(std::uint32_t channel_id, std::uint64_t released) noexcept {
  return std::uint64_t{channel_id} << kCarriedIdShift | (released % kCarriedCountModulus) << kCarriedCountShift;
}
[[nodiscard]] constexpr CarriedCredits carried_credits(std::uint64_t slot_word) noexcept {
  return {static_cast<std::uint32_t>((slot_word >> kCarriedIdShift) & kMaxChannelId),
          static_cast<std::uint32_t>((slot_word >> kCarriedCountShift) % kCarriedCountModulus)};
}
// The released count the carried bits stand for, given `known`. A count at or below it (a
// line read after a fresher credit word, or lines of two channels read out of order) gives
// `known` back: the count only grows, and a sender is never 2^29 messages ahead of it.
[[nodiscard]] constexpr std::uint64_t carried_released(std::uint64_t known, std::uint32_t released_low) noexcept {
  std::uint64_t ahead = (released_low - known) % kCarriedCountModulus;
  return ahead < kCarriedCountModulus / 2 ? known + ahead : known;
}

// Notification of a channel write: bit 63 set | target channel id (19 bits) | slot (12
// bits) | value (32 bits). Slot kCreditSlot: `value` credits for a send channel;
// kFailureSlot, kClosedSlot, kClosedAckSlot: see below; otherwise a message in `slot`: value = its length, or its
// partition index.
static_assert(carried_credits(carry_bits(kMaxChannelId, 0)).channel_id == kMaxChannelId);
inline constexpr std::uint32_t kCreditSlot = 0xfff;
// Slot kFailureSlot, only in a channel message's credits place: the peer's side of the
// channel failed of its own doing (a write or credit of its failed, or it found a corrupt
// flag line) and `value` is its error code, so this side fails too instead of waiting.
inline constexpr std::uint32_t kFailureSlot = 0xffe;
// Slot kClosedSlot, only in a channel message's credits place: the peer closed its side,
// and `value` is the low 32 bits of what that side counted: messages started (a send
// side) or taken (a receive side). This side fails once nothing more can come or be read.
inline constexpr std::uint32_t kClosedSlot = 0xffd;
static_assert(kMaxChannelSlots < kClosedSlot);
// Slot kClosedAckSlot, only in a channel message's credits place: the send side heard of
// its receive side's close and its last write ended; a receive side on the user's memory
// gives that memory back only then.
inline constexpr std::uint32_t kClosedAckSlot = 0xffc;
static_assert(kMaxChannelSlots < kClosedAckSlot);
// Slot kClosedAskingAckSlot: kClosedSlot from a receive side on the user's memory, which
// waits for kClosedAckSlot (others ask none: no message follows their close).
inline constexpr std::uint32_t kClosedAskingAckSlot = 0xffb;
static_assert(kMaxChannelSlots < kClosedAskingAckSlot);
// The peer's whole count from the low 32 bits of its close notice, given this side's own
// `here`: a send side's receiver took at most `slots` fewer than it started (credits), a
// receive side's sender started at most `slots` more than it took. nullopt: no peer could.
[[nodiscard]] constexpr std::optional<std::uint64_t> peer_count_at_close(Role role, std::uint64_t here,
                                                                        std::uint32_t low,
                                                                        std::uint32_t slots) noexcept {
  const auto here_low = static_cast<std::uint32_t>(here);
  const std::uint32_t apart = role == Role::send ? here_low - low : low - here_low;
  if (apart > slots || (role == Role::send ? apart > here : apart > ~here)) return std::nullopt;
  return role == Role::send ? here - apart : here + apart;
}

struct Notification {
  std::uint32_t channel_id = 0;
  std::uint32_t slot = 0;
  std::uint32_t value = 0;
};

[[nodiscard]] std::uint64_t encode(const Notification& notification) noexcept;
[[nodiscard]] Notification decode_notification(std::uint64_t bits) noexcept;

// Context of a channel's transport operation: channel id, credit flag, local buffer.
[[nodiscard]] std::uint64_t operation_context(std::uint32_t channel_id, bool credit, std::uint32_t buffer) noexcept;
struct OperationContext {
  std::uint32_t channel_id = 0;
  bool credit = false;
  std::uint32_t buffer = 0;
};
[[nodiscard]] OperationContext decode_context(std::uint64_t context) noexcept;

// The internal engine tag a hello from a side of `role` travels with (below kAnyTag,
// so no user receive matches it).
[[nodiscard]] int hello_tag(int channel_tag, Role role) noexcept;

// What the send side knows of its messages.
struct SendProgress {
  std::uint64_t started = 0;           // messages started
  std::uint64_t credited = 0;          // messages whose slot the receiver gave back
  // The receiver's released count as last learned, from the credit word (start() reads
  // that line, which the receiver writes, again only when this leaves no credit) or
  // carried in a flag line.
  std::uint64_t credit_word_seen = 0;
  std::uint64_t writes_in_flight = 0;  // posted, not yet write_done
  std::vector<std::uint32_t> buffer_writes;  // writes in flight per local buffer
  // Per local buffer: credits of another channel riding on its send in flight (channel id
  // << 32 | credits, 0: none), given back to that channel if the send fails.
  std::vector<std::uint64_t> buffer_piggyback;
  std::vector<std::uint8_t> partition_sent; // partitioned: of the started message
  std::uint32_t partitions_left = 0;
  // Non-partitioned channels: the buffer picked for the next message (kNoBuffer: none yet)
  // and the one the last message left from.
  std::uint32_t picked_buffer = 0xffffffffU;
  std::uint32_t last_buffer = 0;
  // Direct path: the receiver's free slots (the last one released on top), the slot each
  // position's message took, and how many messages' slots came back to free_slots.
  std::vector<std::uint32_t> free_slots;
  std::vector<std::uint32_t> slot_of_position;
  std::uint64_t slots_reclaimed = 0;
  // Direct path: no wait for a warm slot before this message (a wait timed out: the
  // receiver holds its messages for a while).
  std::uint64_t no_warm_wait_before = 0;
  // Direct path: the pieces-copied word of a split message whose receiver still copies
  // from this side's buffer (nullptr: none), and its piece count. It counts as a write in
  // flight from buffer 0 until every piece is copied.
  std::uint64_t* split_copied = nullptr;
  std::uint64_t split_pieces = 0;

  // Of `count` buffers: the one picked, while no write flies from it; else the last one
  // (still in cache) if free, else the first free one from `in_turn` on (writes are
  // answered in order, yet the buffer in turn may be busy while another is free: the last
  // one taken again), else `in_turn`.
  [[nodiscard]] std::uint32_t pick_buffer(std::uint32_t in_turn, std::uint32_t count) noexcept {
    if (picked_buffer < count && buffer_writes[picked_buffer] == 0) return picked_buffer;
    picked_buffer = buffer_writes[last_buffer] == 0 ? last_buffer : first_free_buffer(in_turn, count);
    return picked_buffer;
  }
  [[nodiscard]] std::uint32_t first_free_buffer(std::uint32_t from, std::uint32_t count) const noexcept {
    for (std::uint32_t step = 0; step < count; ++step)
      if (buffer_writes[(from + step) % count] == 0) return (from + step) % count;
    return from;
  }
};

// What the receive side knows of its slots.
// Positions (sequence % slots) order the messages; a message lands in the slot its
// notification names (= its position) or, on the direct path, the one its flag line names.
struct ReceiveProgress {
  std::vector<std::uint32_t> landing_slot;      // per position: where its message landed
  std::vector<std::uint8_t> slot_held;          // per slot: holds a message not yet released (direct path)
  std::vector<std::uint32_t> landed_bytes;      // per position, once complete
  std::vector<std::uint32_t> partitions_landed; // per slot
  std::vector<std::uint8_t> partition_landed;   // per slot x partition
  std::vector<std::uint8_t> complete;           // per position: landed, not yet released
  std::uint64_t arrived = 0;      // ordered landing: messages landed so far (the next one's position)
  std::uint64_t delivered = 0;    // messages handed out by test()
  std::uint64_t released = 0;     // of those, given back
  std::uint64_t unreported = 0;   // released, credit not yet written
  std::uint64_t owed_since_pass = 0;  // the registry's progress pass when unreported left 0
  std::uint64_t stores_at_last_release = 0;  // direct stores to the peer (registry's count) then
  bool credit_message_busy = false;   // the credit message (in credit_word's line) is on its way
  std::uint32_t credits_in_message = 0;  // what it carries, owed again if it fails
};

struct ChannelState {
  Role role = Role::send;
  ChannelShape shape;
  std::uint32_t id = 0;
  bool self = false;  // the peer is this rank: memcpy, no transport
  Phase phase = Phase::connecting;
  // TETHER_CHANNEL_CONNECT_TIMEOUT after creation or the last wait_connected: past it, a call
  // that waits for the peer's side fails with a timeout (the channel may still connect later).
  std::chrono::steady_clock::time_point connect_deadline = std::chrono::steady_clock::time_point::max();
  bool connect_timed_out = false;  // a call reported that timeout (closing it then does not wait)
  bool closed = false;
  bool watching_peer = false;  // this channel waits on its peer: the engine watches it
  Error failure;      // why the channel failed, for every later call
  Errc failure_notice = Errc::ok;  // owed to the peer's side once this side's writes in flight are done
  bool peer_closed = false;           // the peer's close notice came (kClosedSlot)
  bool close_notice_sent = false;     // this side's close notice went to the peer
  bool close_ack_due = false;         // send side: owed to the closed receive side once writes end
  bool close_acked = false;           // receive side: the sender acknowledged (kClosedAckSlot)
  std::uint64_t peer_closed_count = 0;  // its count: messages the peer started, or took
  Error last_error;   // the last call's refusal

  // Handshake.
  ChannelHello hello_out{};
  ChannelHello hello_in{};
  Request hello_send{};
  Request hello_receive{};
  std::uint32_t peer_channel_id = 0;
  transport::RemoteBuffer peer_landing{};
  transport::PeerIndex transport_peer = transport::kUnknownPeer;

  // Memory: send side, one buffer per slot (one on the direct path, or the user's);
  // receive side, the slots.
  std::byte* memory = nullptr;
  std::size_t memory_bytes = 0;
  std::size_t buffer_stride = 0;         // bytes from one buffer to the next
  std::size_t buffer_prefix = 0;         // send side, pool: room for a message header before each buffer
  // Send side: messages up to this many bytes travel as channel messages (a send of the
  // header in the prefix and the buffer) instead of RMA writes; receive side: > 0 when
  // credits travel as channel messages. 0: RMA writes (TETHER_CHANNEL_INLINE_MAX).
  std::uint32_t inline_max = 0;
  // Non-partitioned channels over a transport that delivers in order (tcp-own): the
  // sender picks each message's slot (the one released last) and names it in the
  // notification; the receiver takes messages in arrival order. Both sides decide alike
  // and their hellos must agree.
  bool ordered_landing = false;
  // Send side over a transport that maps the peer's pool (the direct path, which copies
  // at start()): one buffer, not one per slot. Should the receiver's slots turn out
  // unmappable (user memory), its RMA writes take turns on that buffer.
  bool one_send_buffer = false;
  bool memory_from_pool = false;
  RcacheHandle user_registration;        // user memory through the cache, or
  Registration registration;             // user memory: the transport's registration of it
  bool registered_whole = false;         // registered outside the cache (it had split the range)
  bool holds_user_registration = false;  // counted in ChannelStats::user_registrations_held
  void* descriptor = nullptr;            // local descriptor of user memory (FI_MR_LOCAL)
  // Pool, one line (kCreditLineBytes): send side's credit landing / receive side's credit
  // write source, or its credit message.
  std::uint64_t* credit_word = nullptr;
  std::byte* flags = nullptr;            // receive side: its flag lines (pool)
  // The peer's keys to this side's pool memory: the slots (receive side, pool memory) or
  // the credit word (send side), and the flag lines. Registrations of just those ranges
  // (TETHER_REMOTE_KEYS=exact), kept while the peer may write, then closed.
  transport::ExposedRange landing_key;
  transport::ExposedRange flags_key;
  std::byte* direct_slots = nullptr;     // send side: the receiver's slots, mapped here
  std::byte* direct_flags = nullptr;     // send side: the receiver's flag lines, mapped here
  std::byte* direct_source = nullptr;    // receive side: the sender's buffer, mapped here (split copies)
  transport::ExposedRange source_key;    // send side, direct path: the receiver's key to its buffer
  std::uint64_t* direct_credit = nullptr;  // receive side: the sender's credit word, mapped here
  // Receive side: the sender can store each message straight into the slots and flag
  // lines (direct path, pool slots, no partitions), so the flag line alone shows it: a
  // wait looks there between progress passes. Should the sender's map fail after all, its
  // RMA writes land on the wait's passes only. Set once, when mapped; read by the wait
  // with std::atomic_ref.
  bool stores_show_in_flags = false;

  SendProgress send;
  ReceiveProgress receive;

  // sequence % slots; a mask where the slot count is a power of two, not a 64-bit division
  // per message.
  [[nodiscard]] std::uint32_t position_of(std::uint64_t sequence) const noexcept {
    std::uint64_t slots = shape.slots;
    return static_cast<std::uint32_t>((slots & (slots - 1)) == 0 ? sequence & (slots - 1) : sequence % slots);
  }

  [[nodiscard]] std::size_t partition_bytes() const noexcept { return shape.slot_bytes / shape.partitions; }
  [[nodiscard]] LandingOrder landing_order() const noexcept {
    return ordered_landing ? LandingOrder::by_arrival : LandingOrder::by_position;
  }
  [[nodiscard]] std::uint32_t buffer_count() const noexcept {
    if (role == Role::receive) return shape.slots;
    return memory_from_pool && !one_send_buffer ? shape.slots : 1;
  }
  // Send side, progress lock held: the buffer the next message is produced in. The direct
  // path copies at start(), so one buffer serves every message; partitioned channels (the
  // started message's until its partitions are all ready) and channels to self take their
  // buffers in turn; others take the one the last message
  // left from once it is free again (still in cache), else the next in turn, and keep it
  // until start() takes it or it turns out busy (then nobody may have filled it).
  [[nodiscard]] std::uint32_t next_send_buffer() noexcept {
    if (direct_slots != nullptr) return 0;
    if (partitions_to_fill()) return static_cast<std::uint32_t>((send.started - 1) % buffer_count());
    auto in_turn = static_cast<std::uint32_t>(send.started % buffer_count());
    if (shape.partitions > 1 || self) return in_turn;
    return send.pick_buffer(in_turn, buffer_count());
  }
  // Partitioned: a message started whose partitions are not all ready yet. Its buffer is
  // the one buffer() gives, so partitions may be produced after start(), as with MPI_Pready.
  [[nodiscard]] bool partitions_to_fill() const noexcept { return shape.partitions > 1 && send.partitions_left > 0; }
  // The buffer message `sequence` leaves from (the started one, or a partitioned message's).
  [[nodiscard]] std::uint32_t buffer_of(std::uint64_t sequence) noexcept {
    if (shape.partitions > 1 || self) return static_cast<std::uint32_t>(sequence % buffer_count());
    return next_send_buffer();
  }
  void took_send_buffer() noexcept {
    if (send.picked_buffer < buffer_count()) send.last_buffer = send.picked_buffer;
    send.picked_buffer = 0xffffffffU;
  }
  [[nodiscard]] std::byte* buffer_at(std::uint32_t index) const noexcept {
    std::uint32_t count = buffer_count();
    return memory + buffer_prefix + static_cast<std::size_t>(index < count ? index : index % count) * buffer_stride;
  }
};

// Checks of what a peer sends, as pure functions (channel_checks.cpp; fuzzed by
// tests/fuzz). The hello a channel of `own_role`, `shape` and `own_order` received from
// its peer:
[[nodiscard]] Expected<void> check_hello(const ChannelHello& in, Role own_role, const ChannelShape& shape,
                                         LandingOrder own_order);
// Why a notification of a message landing is refused, or nullptr to accept it.
[[nodiscard]] const char* landing_refusal(Role role, const ChannelShape& shape, const ReceiveProgress& receive,
                                          const Notification& notification) noexcept;
// Where a direct store put its message: in the slot, in the flag line itself, or in the
// slot by a split copy (under way while the line is read).
enum class LineContent : std::uint8_t { slot, flag_line, split };
// Why a direct store's flag line (the slot it names, the length, where the message is)
// is refused, or nullptr.
[[nodiscard]] inline const char* direct_landing_refusal(const ChannelShape& shape, const ReceiveProgress& receive,
                                                        std::uint64_t slot, std::uint32_t length,
                                                        LineContent content = LineContent::slot) noexcept {
  if (slot >= shape.slots) return "slot beyond the channel's slots";
  if (receive.slot_held[slot] != 0) return "the slot still holds a message not released";
  if (content == LineContent::flag_line && length > kFlagInlineBytes) return "length beyond the flag line";
  if (content == LineContent::split && length <= kSplitPieceBytes) return "a split copy of a message too small to split";
  return length > shape.slot_bytes ? "length beyond the slot" : nullptr;
}
// Why a notification of an ordered landing (the slot the sender picked) is refused, or nullptr.
[[nodiscard]] const char* ordered_landing_refusal(Role role, const ChannelShape& shape, const ReceiveProgress& receive,
                                                  const Notification& notification) noexcept;
// Why `credits` returned to a channel are refused, or nullptr to accept them.
[[nodiscard]] const char* credit_refusal(Role role, const SendProgress& send, std::uint32_t credits) noexcept;
// Why a receiver's count of messages released (in its credit word, or carried in a flag
// line) is refused, or nullptr: it may not pass the messages started less those credited
// by credit messages.
[[nodiscard]] inline const char* released_count_refusal(const SendProgress& send, std::uint64_t released) noexcept {
  return released > send.started - send.credited ? "more messages released than started" : nullptr;
}
// Why a released count `released` carried in a flag line from rank `from` for a channel
// of `role` to rank `channel_peer` is refused, or nullptr to accept it.
[[nodiscard]] inline const char* carried_credit_refusal(Role role, int channel_peer, int from, const SendProgress& send,
                                                        std::uint64_t released) noexcept {
  if (role != Role::send) return "credits carried for a receive channel";
  if (channel_peer != from) return "credits carried for a channel to another rank";
  return released_count_refusal(send, released);
}

// For messages: "sender" or "receiver"; a shape as text.
[[nodiscard]] const char* side(Role role) noexcept;
[[nodiscard]] std::string shape_text(std::uint64_t slot_bytes, std::uint32_t slots, std::uint32_t partitions);

}  // namespace tether::persist
