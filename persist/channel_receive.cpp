// The receive side: notifications are checked before they are believed, messages are
// handed out in send order, and released slots go back to the sender as credits.
#include <algorithm>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "persist/channel_registry.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/yield.hpp"

namespace tether::persist {

bool ChannelRegistry::valid_landing(const ChannelState& channel, const Notification& notification) noexcept {
  const char* refusal = channel.ordered_landing
                            ? ordered_landing_refusal(channel.role, channel.shape, channel.receive, notification)
                            : landing_refusal(channel.role, channel.shape, channel.receive, notification);
  if (refusal != nullptr) reject(refusal, encode(notification));
  return refusal == nullptr;
}

void ChannelRegistry::land(ChannelState& channel, const Notification& notification) noexcept {
  if (valid_landing(channel, notification)) record_landing(channel, notification);
}

void ChannelRegistry::record_landing(ChannelState& channel, const Notification& notification) noexcept {
  ReceiveProgress& receive = channel.receive;
  std::uint32_t slot = notification.slot;
  if (channel.ordered_landing) return record_ordered_landing(channel, notification);
  receive.landing_slot[slot] = slot;  // notifications land in their position's own slot
  if (channel.shape.partitions == 1) {
    receive.landed_bytes[slot] = notification.value;
    receive.complete[slot] = 1;
    return;
  }
  receive.partition_landed[static_cast<std::size_t>(slot) * channel.shape.partitions + notification.value] = 1;
  if (++receive.partitions_landed[slot] < channel.shape.partitions) return;
  receive.landed_bytes[slot] = static_cast<std::uint32_t>(channel.shape.slot_bytes);
  receive.complete[slot] = 1;
}

// In arrival order: the next position's message is in the slot the sender named.
void ChannelRegistry::record_ordered_landing(ChannelState& channel, const Notification& notification) noexcept {
  ReceiveProgress& receive = channel.receive;
  auto position = channel.position_of(receive.arrived++);
  receive.landing_slot[position] = notification.slot;
  receive.slot_held[notification.slot] = 1;
  receive.landed_bytes[position] = notification.value;
  receive.complete[position] = 1;
}

// Credits rank `peer` carried for this side's send channels in flag lines that landed but
// were not read yet: a side that reads its acknowledgements after a burst of sends would
// otherwise wait for ever for credits sitting in its own memory. Looked at only when a
// send channel to that rank finds no credit; carried counts only grow, so a line looked at
// twice changes nothing.
void ChannelRegistry::take_unread_carried_credits(int peer) noexcept {
  for (auto& owned : channels_) {
    ChannelState& channel = *owned;
    if (channel.role != Role::receive || channel.shape.peer != peer || channel.flags == nullptr ||
        channel.shape.partitions != 1)
      continue;
    for (std::uint64_t sequence = channel.receive.delivered;
         sequence < channel.receive.delivered + channel.shape.slots; ++sequence) {
      std::uint32_t length = 0;
      std::uint64_t slot_word = landed_slot_word(channel, sequence, length);
      if (slot_word == 0) break;  // not landed (yet)
      take_carried_credits(peer, slot_word);
    }
  }
}

void ChannelRegistry::take_credit(ChannelState& channel, std::uint32_t credits) noexcept {
  if (const char* refusal = credit_refusal(channel.role, channel.send, credits))
    return reject(refusal, encode({channel.id, kCreditSlot, credits}));
  channel.send.credited += credits;
}

// The fast path looks at the next slot first and progresses only when nothing is there.
Status ChannelRegistry::test_received(ChannelState& channel, std::span<const std::byte>& message) noexcept {
  // Messages may land before this side saw the peer's hello; they are handed out after
  // it, when credits know where to go.
  if (channel.phase != Phase::ready && channel.phase != Phase::failed) {
    Status connected = test_connected(channel);
    if (connected != Status::done) return connected;
  }
  Status status = take_landed(channel, message);
  if (status != Status::posted) return status;
  engine_.progress();
  return take_landed(channel, message);
}

// A direct store shows in the channel's own flag line without a progress pass, so the wait
// looks there (take_landed) and makes a whole test with a progress pass every
// Engine::kLooksPerPass-th poll (credits, other channels, liveness); a waiter that yields
// on every poll makes whole tests only. Credits other channels owe and wait to carry are
// flushed after kPassesBeforeFlush passes, so about 8 times as many polls while a wait
// looks (a few microseconds). With a pass of about 500 instructions on every poll, an 8 B
// ping-pong's median was 0.2235 us over 30 runs, 0.2145 with looks. Peeking at the flag
// without the lock between looks changed nothing (0.2295 us against 0.2315, 60 runs
// each, with a pause per peek; 0.2025 against 0.2225 without).
Status ChannelRegistry::wait_received(ChannelState& channel, std::span<const std::byte>& message) noexcept {
  bool looks = std::atomic_ref(channel.stores_show_in_flags).load(std::memory_order_acquire);
  std::uint32_t polls = 0;
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    bool look = looks && !countdown.yields_every_poll() && ++polls % messaging::Engine::kLooksPerPass != 0;
    Status status = look ? take_landed(channel, message) : test_received(channel, message);
    if (status != Status::posted) return status;
  }
}

Status ChannelRegistry::take_landed(ChannelState& channel, std::span<const std::byte>& message) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  ReceiveProgress& receive = channel.receive;
  if (channel.phase == Phase::failed) return take_landed_before_failure(channel, message);
  if (receive.delivered - receive.released >= channel.shape.slots)
    return refuse(channel, Errc::limit_exceeded,
                  fmt::format("all {} slots hold messages not released", channel.shape.slots),
                  "release() a message before asking for the next");
  auto position = channel.position_of(receive.delivered);
  if (receive.complete[position] == 0) check_flag(channel, position);
  if (receive.complete[position] == 0 && channel.peer_closed && receive.delivered == channel.peer_closed_count)
    return fail_as_peer_closed(channel);
  set_waiting(channel, receive.complete[position] == 0 && channel.phase != Phase::failed);
  if (channel.phase == Phase::failed) return failed(channel);
  // Credits stored directly wait for a store to carry them only until the next message is
  // asked for (a receiver that answers nothing: a stream).
  if (channel.direct_credit != nullptr && receive.unreported > 0) return_credits(channel);
  if (receive.complete[position] == 0) {
    // Credits by message wait for a data message to carry them, but not while this side
    // waits: the sender may be waiting for them.
    if (channel.inline_max > 0 && receive.unreported > 0) return_credits(channel);
    return Status::posted;
  }
  message = {channel.buffer_at(receive.landing_slot[position]), receive.landed_bytes[position]};
  ++receive.delivered;
  return Status::done;
}

// A failed channel still hands out the messages that landed whole before it failed (a
// peer's failure notice comes after its writes in flight are done), then its failure.
Status ChannelRegistry::take_landed_before_failure(ChannelState& channel,
                                                  std::span<const std::byte>& message) noexcept {
  ReceiveProgress& receive = channel.receive;
  auto position = channel.position_of(receive.delivered);
  if (receive.delivered - receive.released >= channel.shape.slots || receive.complete[position] == 0)
    return failed(channel);
  message = {channel.buffer_at(receive.landing_slot[position]), receive.landed_bytes[position]};
  ++receive.delivered;
  return Status::done;
}

// Word 1 of the flag line of message `sequence` if a direct store wrote it (its length in
// `length`), else 0: the line holds another message's sequence, or is all zero (a 32-bit
// sequence wrap).
std::uint64_t ChannelRegistry::landed_slot_word(const ChannelState& channel, std::uint64_t sequence,
                                                std::uint32_t& length) noexcept {
  auto position = channel.position_of(sequence);
  std::uint64_t flag = std::atomic_ref(*flag_at(channel.flags, position)).load(std::memory_order_acquire);
  if ((flag >> 32) != ((sequence + 1) & 0xffffffffU)) return 0;
  length = static_cast<std::uint32_t>(flag);
  std::uint64_t slot_word = std::atomic_ref(*landing_slot_at(channel.flags, position)).load(std::memory_order_relaxed);
  return (slot_word & kSlotWritten) != 0 ? slot_word : 0;
}

// A direct write shows as the flag of the position carrying the next sequence number;
// the flag line names the slot the sender chose, which must be free. A split copy is
// complete once its pieces are; this side copies the pieces left to take meanwhile.
void ChannelRegistry::check_flag(ChannelState& channel, std::uint32_t position) noexcept {
  if (channel.shape.partitions != 1) return;
  ReceiveProgress& receive = channel.receive;
  std::uint32_t length = 0;
  std::uint64_t slot_word = landed_slot_word(channel, receive.delivered, length);
  if (slot_word == 0) return;
  std::uint64_t slot = slot_word & kSlotMask;
  bool in_flag_line = (slot_word & kSlotInline) != 0;
  bool split = (slot_word & kSlotSplit) != 0;
  const char* refusal = in_flag_line && split ? "a message both in its flag line and split"
                                              : direct_landing_refusal(channel.shape, receive, slot, length,
                                                                       in_flag_line ? LineContent::flag_line
                                                                       : split      ? LineContent::split
                                                                                    : LineContent::slot);
  if (refusal == nullptr && split) refusal = split_refusal(channel, position, length);
  if (refusal != nullptr) {
    (void)fail_channel_and_tell_peer(
        channel, Errc::invalid_argument,
        fmt::format("the flag of message {} names slot {} and {} bytes: {}", receive.delivered, slot, length, refusal),
        "the peer's memory or tether build is broken; run the same tether on every rank and recreate the channel");
    return;
  }
  if (split && !join_split(channel, position, slot, length)) return;
  if (in_flag_line)
    std::memcpy(channel.buffer_at(static_cast<std::uint32_t>(slot)), inline_payload_at(channel.flags, position), length);
  receive.landing_slot[position] = static_cast<std::uint32_t>(slot);
  receive.slot_held[slot] = 1;
  receive.landed_bytes[position] = length;
  receive.complete[position] = 1;
  engine_.heard_from(channel.shape.peer);
  take_carried_credits(channel.shape.peer, slot_word);
}

// This side's share of a split copy: pieces in turn with the sender, from its mapped
// buffer into the slot (so they land in this core's cache). Whether every piece is copied.
bool ChannelRegistry::join_split(ChannelState& channel, std::uint32_t position, std::uint64_t slot,
                                 std::uint32_t length) noexcept {
  if (channel.direct_source != nullptr) {
    std::byte* destination = channel.buffer_at(static_cast<std::uint32_t>(slot));
    stats_.pieces_receiver_copied +=
        copy_split_share(channel.flags, position, length, [&](std::size_t offset, std::size_t bytes) {
          std::memcpy(destination + offset, channel.direct_source + offset, bytes);
        });
  }
  return std::atomic_ref(*split_pieces_copied_at(channel.flags, position)).load(std::memory_order_acquire) >=
         split_pieces(length);
}

// Counts a sound split copy never shows: more pieces copied than the message has, or more
// taken than the two sides' claims could reach (each side's last claim finds none left).
const char* ChannelRegistry::split_refusal(const ChannelState& channel, std::uint32_t position,
                                           std::uint32_t length) noexcept {
  std::uint64_t pieces = split_pieces(length);
  if (std::atomic_ref(*split_pieces_copied_at(channel.flags, position)).load(std::memory_order_relaxed) > pieces)
    return "more pieces of a split copy copied than it has";
  if (std::atomic_ref(*split_pieces_taken_at(channel.flags, position)).load(std::memory_order_relaxed) > pieces + 2)
    return "more pieces of a split copy taken than it has";
  return nullptr;
}

// Credits for a send channel of this side that rank `from` carried in a flag line.
void ChannelRegistry::take_carried_credits(int from, std::uint64_t slot_word) noexcept {
  CarriedCredits carried = carried_credits(slot_word);
  if (carried.channel_id == 0) return;
  ChannelState* sender = find(carried.channel_id);
  if (sender == nullptr || sender->closed) return reject("credits carried for no open channel", slot_word);
  std::uint64_t released = carried_released(sender->send.credit_word_seen, carried.released_low);
  if (const char* refusal = carried_credit_refusal(sender->role, sender->shape.peer, from, sender->send, released))
    return reject(refusal, slot_word);
  sender->send.credit_word_seen = released;
}

bool ChannelRegistry::arrived(ChannelState& channel, std::uint32_t partition) noexcept {
  engine_.progress();
  std::lock_guard lock(engine_.progress_mutex());
  if (channel.shape.partitions == 1 || partition >= channel.shape.partitions) return false;
  // Every slot held: the next message has no slot to land in yet (the position's bits are
  // still the held message's).
  if (channel.receive.delivered - channel.receive.released >= channel.shape.slots) return false;
  // Nothing more will land: true, so a loop polling arrived() goes on to test() or wait(),
  // which give the error (a failed channel, or a sender that closed before this message).
  if (channel.phase == Phase::failed) return true;
  if (channel.peer_closed && channel.receive.delivered == channel.peer_closed_count) return true;
  auto slot = channel.position_of(channel.receive.delivered);
  // The peer is watched while the message is incomplete, whichever partition is asked
  // for: a silent peer is noticed (TETHER_PEER_TIMEOUT) however the caller polls.
  set_waiting(channel, channel.receive.complete[slot] == 0);
  return channel.receive.partition_landed[static_cast<std::size_t>(slot) * channel.shape.partitions + partition] != 0;
}

Status ChannelRegistry::release(ChannelState& channel) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  ReceiveProgress& receive = channel.receive;
  if (receive.delivered == receive.released)
    return refuse(channel, Errc::invalid_argument, "release() with no message held",
                  "release once per message that test() or wait() gave");
  auto slot = channel.position_of(receive.released);
  receive.slot_held[receive.landing_slot[slot]] = 0;
  receive.complete[slot] = 0;
  receive.partitions_landed[slot] = 0;
  auto partitions = receive.partition_landed.begin() + static_cast<std::ptrdiff_t>(slot) * channel.shape.partitions;
  std::fill(partitions, partitions + channel.shape.partitions, 0);
  ++receive.released;
  ++receive.unreported;
  if (channel.phase == Phase::failed) return Status::done;
  std::uint64_t stores = direct_stores_to_[static_cast<std::size_t>(channel.shape.peer)];
  bool answered = stores != receive.stores_at_last_release;  // this side stored to the peer since
  receive.stores_at_last_release = stores;
  if (credits_go_now(channel, answered)) return_credits(channel);
  else owe_credits(channel);
  return Status::done;
}

// Credits by message or direct store, by default: more than half the slots at once; fewer
// ride on data to that rank (a direct store's flag line) or go ahead of a write to it, or
// go when this side asks for its next message. Other credits go in batches of a quarter of
// the slots (TETHER_CHANNEL_CREDIT_BATCH). A credit stored directly waits for a store to
// carry it only where this side `answered`: stored to that rank since its last release; in
// a stream it goes at once, as the sender may be waiting for it.
bool ChannelRegistry::credits_go_now(const ChannelState& channel, bool answered) const noexcept {
  if (channel.self) return true;
  if (channel.direct_credit != nullptr && !answered) return true;
  std::uint32_t batch = credit_batch_ > 0 ? credit_batch_ : std::max<std::uint32_t>(1, channel.shape.slots / 4);
  bool carried = channel.inline_max > 0 || channel.direct_credit != nullptr;
  if (carried && credit_batch_ == 0) batch = channel.shape.slots / 2 + 1;
  return channel.receive.unreported >= std::min(batch, channel.shape.slots);
}

void ChannelRegistry::return_credits(ChannelState& channel) noexcept {
  ReceiveProgress& receive = channel.receive;
  if (receive.unreported == 0) return;
  auto credits = static_cast<std::uint32_t>(receive.unreported);
  if (channel.direct_credit != nullptr) {
    std::uint64_t released = receive.released;
    // TETHER_INJECT_CORRUPT_CREDIT: from the N-th store on, more released than ever sent (every
    // later store too: a sender that read none of the bad words in between would never see one)
    if (inject_corrupt_credit_ != 0 && stats_.credit_stores + 1 >= inject_corrupt_credit_) [[unlikely]]
      released += std::uint64_t{1} << 20;
    std::atomic_ref(*channel.direct_credit).store(released, std::memory_order_release);
    receive.unreported = 0;
    ++stats_.credit_stores;
    return;
  }
  if (channel.self) {
    if (ChannelState* sender = find(channel.peer_channel_id)) take_credit(*sender, credits);
    receive.unreported = 0;
    return;
  }
  if (channel.inline_max > 0 && receive.credit_message_busy) return owe_credits(channel);  // one at a time
  if (credit_failure_injected()) return inject_credit_failure(channel);
  if (channel.inline_max > 0) return send_credit_message(channel);
  Status status = engine_.transport().write_with_notification(
      channel.transport_peer, channel.credit_word, sizeof(std::uint64_t), nullptr, channel.peer_landing, 0,
      encode({channel.peer_channel_id, kCreditSlot, credits}), operation_context(channel.id, true, 0));
  if (status == Status::retry) return owe_credits(channel);
  if (status == Status::error) {
    const Error& error = engine_.transport().last_error();
    (void)fail_channel_and_tell_peer(channel, error.code, fmt::format("a credit write failed: {}", error.cause),
                                     "check that the peer is alive");
    return;
  }
  ++stats_.credit_writes;
  receive.unreported = 0;
}

}  // namespace tether::persist
