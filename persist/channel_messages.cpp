// Small messages as sends: where a send arrives sooner than an RMA write with notification
// (software providers: tcp;ofi_rxm, libfabric shm), a message up to inline_max bytes goes
// as one send of a channel header, written into the room before its buffer, and the
// buffer itself: no copy, no extra registration. The receiver checks the header against
// its own channel and copies the payload into the slot. Credits go back the same way,
// riding on a data message to the same rank when one goes out first.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "persist/channel_registry.hpp"

namespace tether::persist {
namespace {

using messaging::write_channel_header;

// A receive channel to `rank` whose credits wait for a message to carry them.
bool owes_credits_by_message(const ChannelState& channel, int rank) noexcept {
  return channel.shape.peer == rank && channel.inline_max > 0 && channel.receive.unreported > 0 && !channel.closed &&
         channel.phase == Phase::ready;
}

// The size of the message released last, while its credit is owed: the sender cannot land
// a new message at that position before it has the credit.
std::size_t last_released_bytes(const ChannelState& channel) noexcept {
  const ReceiveProgress& receive = channel.receive;
  return receive.released == 0 ? 0 : receive.landed_bytes[channel.position_of(receive.released - 1)];
}

}  // namespace

// Decided once the peer's hello came: it says how large a message it takes (0: none).
std::uint32_t ChannelRegistry::inline_limit(const ChannelState& channel) const noexcept {
  std::uint32_t accepted = channel.hello_in.accepts_message_bytes;
  if (channel.self || inline_max_ == 0 || accepted == 0 || channel.direct_slots != nullptr ||
      channel.direct_credit != nullptr || !engine_.transport().sends_beat_small_writes(channel.transport_peer))
    return 0;
  if (channel.role == Role::receive) return inline_max_;  // credits as messages
  if (channel.buffer_prefix < messaging::kChannelHeaderBytes) return 0;  // user memory, or partitioned
  return static_cast<std::uint32_t>(std::min<std::uint64_t>({inline_max_, accepted, channel.shape.slot_bytes}));
}

ChannelState* ChannelRegistry::owing_channel_to(int rank) noexcept {
  for (ChannelState* channel : owing_credits_)
    if (owes_credits_by_message(*channel, rank)) return channel;
  return nullptr;
}

// Credits owed to `rank` go before a write to it, not when this side next waits, where
// that rank's messages outgrow the L2 through the slots: the peer answering the write (a
// ping-pong, a halo exchange) would otherwise pick its landing slot before the credit
// arrived and land in a cold slot (a 1 MiB ping-pong over tcp-own took its 2 slots in
// turn). Smaller messages stay warm anyway, and the credit message would cost the write
// a syscall first (a 64 KiB ping-pong over tcp-own: 27 -> 31 us).
void ChannelRegistry::return_credits_ahead_of_write(int rank) noexcept {
  // By index: return_credits may owe again, but owe_credits adds no channel already listed.
  for (std::size_t i = 0; i < owing_credits_.size(); ++i) {
    ChannelState& owing = *owing_credits_[i];
    if (owes_credits_by_message(owing, rank) && slots_outgrow_l2(owing, last_released_bytes(owing)))
      return_credits(owing);
  }
}

Status ChannelRegistry::post_message(ChannelState& channel, std::uint64_t sequence, std::size_t length,
                                     std::uint32_t value) noexcept {
  std::uint32_t slot = landing_slot_of(channel, sequence);
  std::uint32_t buffer = channel.buffer_of(sequence);
  ChannelState* owing = owing_channel_to(channel.shape.peer);
  auto credits = owing == nullptr ? 0U : static_cast<std::uint32_t>(owing->receive.unreported);
  messaging::ChannelCarry carry{encode({channel.peer_channel_id, slot, value}),
                                owing == nullptr ? 0 : encode({owing->peer_channel_id, kCreditSlot, credits})};
  std::byte* message = channel.buffer_at(buffer) - messaging::kChannelHeaderBytes;
  write_channel_header(message, engine_.rank(), channel.shape.tag, length, carry);
  transport::Transport& transport = engine_.transport();
  Status status = transport.send(channel.transport_peer, message, messaging::kChannelHeaderBytes + length,
                                 channel.descriptor, operation_context(channel.id, false, buffer));
  if (status == Status::error)
    return fail_on_transport_error(channel);
  if (status == Status::retry) return status;
  if (channel.ordered_landing) take_slot(channel, sequence, slot);
  if (owing != nullptr) {
    owing->receive.unreported = 0;
    ++stats_.piggybacked_credits;
  }
  ++stats_.data_messages;
  if (status == Status::done) return Status::done;  // injected: the buffer is free again
  ++channel.send.writes_in_flight;
  ++channel.send.buffer_writes[buffer];
  if (owing != nullptr) channel.send.buffer_piggyback[buffer] = std::uint64_t{owing->id} << 32 | credits;
  return Status::posted;
}

// The credit message lives in the receive channel's credit line; one at a time (the caller,
// return_credits, owes the credits while one is on its way).
void ChannelRegistry::send_credit_message(ChannelState& channel) noexcept {
  ReceiveProgress& receive = channel.receive;
  auto credits = static_cast<std::uint32_t>(receive.unreported);
  messaging::ChannelCarry carry{0, encode({channel.peer_channel_id, kCreditSlot, credits})};
  auto* message = reinterpret_cast<std::byte*>(channel.credit_word);
  write_channel_header(message, engine_.rank(), channel.shape.tag, 0, carry);
  transport::Transport& transport = engine_.transport();
  Status status = transport.send(channel.transport_peer, message, messaging::kChannelHeaderBytes, nullptr,
                                 operation_context(channel.id, true, 0));
  if (status == Status::retry) return owe_credits(channel);
  if (status == Status::error) {
    (void)fail_channel_and_tell_peer(channel, transport.last_error().code,
                                     fmt::format("a credit message failed: {}", transport.last_error().cause),
                                     "check that the peer is alive");
    return;
  }
  receive.credit_message_busy = status == Status::posted;
  receive.credits_in_message = status == Status::posted ? credits : 0;
  ++stats_.credit_messages;
  receive.unreported = 0;
}

// Credits whose message failed (the send completed with an error) are owed again.
void ChannelRegistry::owe_again(std::uint32_t channel_id, std::uint32_t credits) noexcept {
  ChannelState* channel = find(channel_id);
  if (channel == nullptr || credits == 0 || channel->phase == Phase::failed) return;
  channel->receive.unreported += credits;
  owe_credits(*channel);
}

// The channel a message from `source` names, or nullptr (counted or logged).
ChannelState* ChannelRegistry::channel_of_message(int source, std::uint64_t bits) noexcept {
  Notification notification = decode_notification(bits);
  ChannelState* channel = find(notification.channel_id);
  if (channel == nullptr && closed_since(notification.channel_id)) {
    ++stats_.late_notifications;  // for a channel closed since
    return nullptr;
  }
  if (channel == nullptr) {
    reject("no channel has that id", bits);
    return nullptr;
  }
  if (channel->shape.peer != source || channel->self) {
    reject("a message from another rank than the channel's peer", bits);
    return nullptr;
  }
  return channel;
}

void ChannelRegistry::take_message_credits(int source, std::uint64_t bits) noexcept {
  Notification notification = decode_notification(bits);
  if (notification.slot == kFailureSlot) return on_peer_side_failed(source, bits);
  if (notification.slot == kClosedSlot || notification.slot == kClosedAskingAckSlot)
    return on_peer_closed(source, bits);
  if (notification.slot == kClosedAckSlot) return on_close_acked(source, bits);
  if (notification.slot != kCreditSlot) return reject("a credit word that names a slot", bits);
  if (ChannelState* channel = channel_of_message(source, bits)) take_credit(*channel, notification.value);
}

void ChannelRegistry::land_message(int source, std::uint64_t bits, std::span<const std::byte> payload) noexcept {
  Notification notification = decode_notification(bits);
  if (notification.slot == kCreditSlot) return reject("a data message that names the credit slot", bits);
  ChannelState* channel = channel_of_message(source, bits);
  if (channel == nullptr || !valid_landing(*channel, notification)) return;
  if (channel->shape.partitions != 1 || payload.size() != notification.value)
    return reject("a message whose length is not its notification's, or for a partitioned channel", bits);
  if (!payload.empty()) std::memcpy(channel->buffer_at(notification.slot), payload.data(), payload.size());
  record_landing(*channel, notification);
}

void ChannelRegistry::on_message(const messaging::DecodedMessage& message) noexcept {
  auto source = static_cast<int>(message.header.source_rank);
  if (message.channel.credits != 0) take_message_credits(source, message.channel.credits);
  if (message.channel.notification != 0) land_message(source, message.channel.notification, message.payload);
}

}  // namespace tether::persist
