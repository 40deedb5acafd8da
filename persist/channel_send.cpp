// The send side: start() is one RDMA write into the receiver's next slot, when a credit
// and the local buffer allow; partitioned messages go out one ready() at a time.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "persist/channel_registry.hpp"
#include "transport/shm/peer_copy.hpp"
#include "runtime/base/yield.hpp"

namespace tether::persist {

// Outside the progress lock. done when ready, retry while the handshake runs.
Status ChannelRegistry::connected_or_retry(ChannelState& channel) noexcept {
  if (channel.phase == Phase::ready) return Status::done;
  Status status = test_connected(channel);
  return status == Status::posted ? Status::retry : status;
}

// Progresses only when the buffer is busy: a halo exchange asking for every channel's next
// buffer each iteration paid a pass per channel (over tcp: a recv per connection) for nothing.
Status ChannelRegistry::next_buffer(ChannelState& channel, std::span<std::byte>& buffer) noexcept {
  Status status = free_buffer(channel, buffer);
  if (status != Status::retry) return status;
  engine_.progress();
  return free_buffer(channel, buffer);
}

Status ChannelRegistry::free_buffer(ChannelState& channel, std::span<std::byte>& buffer) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  if (channel.phase == Phase::failed) return failed(channel);
  finish_split(channel);
  std::uint32_t index = channel.next_send_buffer();
  buffer = {channel.buffer_at(index), channel.shape.slot_bytes};
  // A started message's partitions not yet ready are the caller's to fill, whatever flies.
  bool busy = !channel.partitions_to_fill() && channel.send.buffer_writes[index] > 0;
  set_waiting(channel, busy);  // its write waits on the peer, which may fall silent (TETHER_PEER_TIMEOUT)
  return busy ? Status::retry : Status::done;
}

std::span<std::byte> ChannelRegistry::next_buffer_span(ChannelState& channel) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  return {channel.buffer_at(channel.next_send_buffer()), channel.shape.slot_bytes};
}

// A retry progresses before it returns, so a caller's retry loop moves credits along.
Status ChannelRegistry::start(ChannelState& channel, std::size_t bytes) noexcept {
  if (Status connected = connected_or_retry(channel); connected != Status::done) return connected;
  Status status = start_locked(channel, bytes);
  if (status == Status::retry) engine_.progress();
  return status;
}

Status ChannelRegistry::start_locked(ChannelState& channel, std::size_t bytes) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  const ChannelShape& shape = channel.shape;
  SendProgress& send = channel.send;
  if (channel.phase == Phase::failed) return failed(channel);
  if (channel.peer_closed) return fail_as_peer_closed(channel);
  finish_split(channel);
  if (bytes > shape.slot_bytes)
    return refuse(channel, Errc::invalid_argument, fmt::format("start({}) on a channel of {}-byte slots", bytes, shape.slot_bytes),
                  "send at most slot_bytes, or create both sides with larger slots");
  if (shape.partitions > 1 && bytes != shape.slot_bytes)
    return refuse(channel, Errc::invalid_argument, fmt::format("start({}) on a partitioned channel", bytes),
                  fmt::format("partitioned channels move whole slots: start({})", shape.slot_bytes));
  if (send.partitions_left > 0)
    return refuse(channel, Errc::invalid_argument,
                  fmt::format("the previous message still has {} partitions not ready", send.partitions_left),
                  "call ready() for every partition before the next start()");
  // every slot is the receiver's, as far as this side knew and after a fresh look
  bool no_credit =
      send.started - known_credits(channel) >= shape.slots && send.started - credits_of(channel) >= shape.slots;
  if (no_credit) {  // credits may wait in lines from that rank not read yet (late acknowledgements)
    take_unread_carried_credits(shape.peer);
    no_credit = send.started - known_credits(channel) >= shape.slots;
  }
  if (channel.phase == Phase::failed) [[unlikely]]
    return failed(channel);  // credits_of refused the credit word
  // A busy buffer waits on the peer too: a write to it, or its share of a split copy.
  bool buffer_busy = !no_credit && send.buffer_writes[channel.next_send_buffer()] > 0;
  set_waiting(channel, no_credit || buffer_busy);
  if (no_credit || buffer_busy) return Status::retry;
  if (shape.partitions > 1) {
    send.partitions_left = shape.partitions;
    std::fill(send.partition_sent.begin(), send.partition_sent.end(), 0);
    ++send.started;
    return Status::posted;
  }
  if (channel.direct_slots != nullptr) return store_direct(channel, bytes);
  Status status = post_data_write(channel, send.started, 0, bytes, static_cast<std::uint32_t>(bytes));
  if (status == Status::posted || status == Status::done) {
    channel.took_send_buffer();
    ++send.started;
  }
  return status;
}

// Credits as the receiver's word says now (credit notifications are in `credited`). The
// word is the receiver's to write: one counting more releases than messages started is
// refused (the channel fails, both sides told) rather than let this side overwrite slots.
std::uint64_t ChannelRegistry::credits_of(ChannelState& channel) noexcept {
  SendProgress& send = channel.send;
  std::uint64_t word = std::atomic_ref(*channel.credit_word).load(std::memory_order_acquire);
  if (released_count_refusal(send, word) != nullptr) [[unlikely]] {
    (void)fail_channel_and_tell_peer(
        channel, Errc::invalid_argument,
        fmt::format("rank {}'s credit word says {} messages released, but {} were started and {} credited otherwise",
                    channel.shape.peer, word, send.started, send.credited),
        "the peer's memory or tether build is broken; run the same tether on every rank and recreate the channel");
    return known_credits(channel);
  }
  send.credit_word_seen = std::max(send.credit_word_seen, word);  // a flag line may have brought more
  return known_credits(channel);
}

// Credits as this side last read them: never more than there are (the word only grows).
std::uint64_t ChannelRegistry::known_credits(const ChannelState& channel) noexcept {
  return channel.send.credited + channel.send.credit_word_seen;
}

// Direct path and ordered landing: the slots of messages the receiver released (up to
// `credits`) go back on the free stack in release order, so the one released last (still
// in cache) is the next one taken. The credit start() found is within `credits`, so the
// stack is not empty.
std::uint32_t ChannelRegistry::next_free_slot(ChannelState& channel, std::uint64_t credits) noexcept {
  SendProgress& send = channel.send;
  for (; send.slots_reclaimed < credits; ++send.slots_reclaimed)
    send.free_slots.push_back(send.slot_of_position[channel.position_of(send.slots_reclaimed)]);
  return send.free_slots.back();
}

// Message `sequence` went into `slot` (next_free_slot's).
void ChannelRegistry::take_slot(ChannelState& channel, std::uint64_t sequence, std::uint32_t slot) noexcept {
  channel.send.free_slots.pop_back();
  channel.send.slot_of_position[channel.position_of(sequence)] = slot;
  ++stats_.sender_picked_slots;
}

// Where message `sequence` lands: the slot the sender picks, or its position's own.
std::uint32_t ChannelRegistry::landing_slot_of(ChannelState& channel, std::uint64_t sequence) noexcept {
  if (channel.ordered_landing) return next_free_slot(channel, credits_of(channel));
  return channel.position_of(sequence);
}

// Where messages rotating through every slot (and the send buffer) outgrow the L2 cache,
// a message copied into a cold slot costs more than a short wait for the receiver to
// release the slot the last message took (still in cache): streaming 1 MiB messages over
// 4 slots ran at 10-15 GB/s taking whichever slot was free, 17-18 over 1 slot (2 MiB L2).
// So it waits up to an eighth of the copy's time at 16 GB/s (8 us for 1 MiB, never more
// than 16 us: the progress lock is held) when that slot is still held, then takes
// another; after a wait that timed out (a receiver that holds messages) the next `slots`
// messages do not wait.
void ChannelRegistry::await_warm_slot(ChannelState& channel, std::size_t bytes) noexcept {
  constexpr std::size_t kBytesPerWaitNanosecond = 128;  // an eighth of the copy at 16 GB/s
  constexpr std::chrono::nanoseconds kLongestWait = std::chrono::microseconds(16);
  SendProgress& send = channel.send;
  if (!slots_outgrow_l2(channel, bytes) || send.started < send.no_warm_wait_before ||
      credits_of(channel) >= send.started)
    return;
  ++stats_.warm_slot_waits;
  auto wait = std::min<std::chrono::nanoseconds>(std::chrono::nanoseconds(bytes / kBytesPerWaitNanosecond), kLongestWait);
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (unsigned spins = 1; credits_of(channel) < send.started; ++spins) {
    _mm_pause();
    if (spins % 8 == 0 && std::chrono::steady_clock::now() > deadline) {
      send.no_warm_wait_before = send.started + 1 + channel.shape.slots;
      return;
    }
  }
}

// The direct path: the message is in the receiver's slot (or its flag line) when this
// returns, or, split, announced there with its pieces being copied. It takes the slot
// released last (a round robin over the slots would copy into cold memory: a 1 MiB
// ping-pong over 2 slots took 1.3-3x as long as over 1 on a 2 MiB-L2 Xeon); a message
// carried in the flag line does not touch the slot, so it does not look at the credit
// word for a fresher choice.
Status ChannelRegistry::store_direct(ChannelState& channel, std::size_t bytes) noexcept {
  SendProgress& send = channel.send;
  bool in_flag_line = bytes <= kFlagInlineBytes;
  // Split only where this side offered the receiver its buffer (pool memory, the option on).
  bool split = !in_flag_line && channel.hello_out.source.length != 0 && splits(bytes);
  await_warm_slot(channel, bytes);
  std::uint32_t slot = next_free_slot(channel, in_flag_line ? known_credits(channel) : credits_of(channel));
  if (channel.phase == Phase::failed) [[unlikely]]
    return failed(channel);  // credits_of refused the credit word: nothing is stored
  take_slot(channel, send.started, slot);
  auto position = channel.position_of(send.started);
  std::uint64_t slot_word = kSlotWritten | slot | carry_owed_credits(channel.shape.peer);
  ++direct_stores_to_[static_cast<std::size_t>(channel.shape.peer)];
  if (in_flag_line) {
    std::memcpy(inline_payload_at(channel.direct_flags, position), channel.buffer_at(0), bytes);
    slot_word |= kSlotInline;
    ++stats_.flag_line_messages;
  } else if (split) {  // announced before the bytes: the receiver may take pieces at once
    std::atomic_ref(*split_pieces_taken_at(channel.direct_flags, position)).store(0, std::memory_order_relaxed);
    std::atomic_ref(*split_pieces_copied_at(channel.direct_flags, position)).store(0, std::memory_order_relaxed);
    slot_word |= kSlotSplit;
    ++stats_.split_copies;
  } else if (transport::shm::copy_to_peer(channel.direct_slots + slot * channel.shape.slot_bytes, channel.buffer_at(0),
                                          bytes, streaming_from_)) {
    ++stats_.streamed_stores;
  }
  if (inject_corrupt_flag_ != 0 && stats_.direct_stores + 1 == inject_corrupt_flag_)
    slot_word = (slot_word & ~kSlotMask) | channel.shape.slots;  // TETHER_INJECT_CORRUPT_FLAG: past the last slot
  std::atomic_ref(*landing_slot_at(channel.direct_flags, position)).store(slot_word, std::memory_order_relaxed);
  std::uint64_t flag = ((send.started + 1) & 0xffffffffU) << 32 | bytes;
  std::atomic_ref(*flag_at(channel.direct_flags, position)).store(flag, std::memory_order_release);
  ++send.started;
  ++stats_.data_writes;
  ++stats_.direct_stores;
  return split ? copy_split_pieces(channel, slot, position, bytes) : Status::done;
}

// The sender's share of a split copy: pieces in turn with the receiver, until none is
// left to take. done when every piece is copied by then; posted while the receiver still
// copies from this side's buffer (finish_split completes the send). Whether the message
// streams (TETHER_SHM_STREAMING_COPY) is decided for the whole message, not per piece.
Status ChannelRegistry::copy_split_pieces(ChannelState& channel, std::uint32_t slot, std::uint32_t position,
                                          std::size_t bytes) noexcept {
  std::byte* destination = channel.direct_slots + slot * channel.shape.slot_bytes;
  const std::byte* source = channel.buffer_at(0);
  bool streams = bytes >= streaming_from_;
  if (streams) ++stats_.streamed_stores;
  stats_.pieces_sender_copied +=
      copy_split_share(channel.direct_flags, position, bytes, [&](std::size_t offset, std::size_t piece_bytes) {
        if (streams) transport::shm::stream_copy(destination + offset, source + offset, piece_bytes);
        else std::memcpy(destination + offset, source + offset, piece_bytes);
      });
  std::uint64_t* copied = split_pieces_copied_at(channel.direct_flags, position);
  if (std::atomic_ref(*copied).load(std::memory_order_acquire) >= split_pieces(bytes)) return Status::done;
  SendProgress& send = channel.send;
  send.split_copied = copied;
  send.split_pieces = split_pieces(bytes);
  ++send.writes_in_flight;
  ++send.buffer_writes[0];
  return Status::posted;
}

// The split message's receiver copied its last piece: its send, and the buffer, are free.
// A failed channel keeps them busy, as it keeps RMA writes in flight: a receiver given up
// for silent may still read the buffer. Progress lock held.
void ChannelRegistry::finish_split(ChannelState& channel) noexcept {
  SendProgress& send = channel.send;
  if (send.split_copied == nullptr ||
      std::atomic_ref(*send.split_copied).load(std::memory_order_acquire) < send.split_pieces)
    return;
  send.split_copied = nullptr;
  --send.writes_in_flight;
  --send.buffer_writes[0];
  send_notices_when_due(channel);
}

Status ChannelRegistry::ready(ChannelState& channel, std::uint32_t partition) noexcept {
  Status status = ready_locked(channel, partition);
  if (status == Status::retry) engine_.progress();
  return status;
}

Status ChannelRegistry::ready_locked(ChannelState& channel, std::uint32_t partition) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  SendProgress& send = channel.send;
  if (channel.phase == Phase::failed) return failed(channel);
  if (channel.peer_closed) return fail_as_peer_closed(channel);
  if (channel.shape.partitions == 1)
    return refuse(channel, Errc::invalid_argument, "ready() on a channel without partitions",
                  "create the channel with partitions > 1, or send with start(bytes)");
  if (send.partitions_left == 0)
    return refuse(channel, Errc::invalid_argument, "ready() with no message started", "call start() first");
  if (partition >= channel.shape.partitions || send.partition_sent[partition] != 0)
    return refuse(channel, Errc::invalid_argument,
                  fmt::format("ready({}) of {} partitions ({})", partition, channel.shape.partitions,
                              partition >= channel.shape.partitions ? "no such partition" : "already ready"),
                  "mark each partition ready once, 0 to partitions - 1");
  std::size_t bytes = channel.partition_bytes();
  Status status = post_data_write(channel, send.started - 1, partition * bytes, bytes, partition);
  if (status == Status::posted || status == Status::done) {
    send.partition_sent[partition] = 1;
    --send.partitions_left;
  }
  return status;
}

Status ChannelRegistry::post_data_write(ChannelState& channel, std::uint64_t sequence, std::size_t offset,
                                        std::size_t length, std::uint32_t value) noexcept {
  if (channel.self) return copy_to_self(channel, sequence, offset, length, value);
  if (channel_write_failure_injected()) return inject_write_failure(channel, sequence);
  Status status = post_remote_data(channel, sequence, offset, length, value);
  if (status == Status::posted || status == Status::done) ++remote_data_posts_;
  return status;
}

Status ChannelRegistry::post_remote_data(ChannelState& channel, std::uint64_t sequence, std::size_t offset,
                                         std::size_t length, std::uint32_t value) noexcept {
  if (channel.inline_max > 0 && length <= channel.inline_max && offset == 0) return post_message(channel, sequence, length, value);
  return_credits_ahead_of_write(channel.shape.peer);
  std::uint32_t slot = landing_slot_of(channel, sequence);
  if (channel.phase == Phase::failed) [[unlikely]]
    return failed(channel);  // credits_of refused the credit word: nothing is written
  std::uint32_t buffer = channel.buffer_of(sequence);
  transport::Transport& transport = engine_.transport();
  Status status = transport.write_with_notification(
      channel.transport_peer, channel.buffer_at(buffer) + offset, length, channel.descriptor, channel.peer_landing,
      slot * channel.shape.slot_bytes + offset, encode({channel.peer_channel_id, slot, value}),
      operation_context(channel.id, false, buffer));
  if (status == Status::error)
    return fail_on_transport_error(channel);
  if (status == Status::retry) return status;
  if (channel.ordered_landing) take_slot(channel, sequence, slot);
  ++channel.send.writes_in_flight;
  ++channel.send.buffer_writes[buffer];
  ++stats_.data_writes;
  return Status::posted;
}

Status ChannelRegistry::copy_to_self(ChannelState& channel, std::uint64_t sequence, std::size_t offset,
                                     std::size_t length, std::uint32_t value) noexcept {
  ChannelState* target = find(channel.peer_channel_id);
  if (target == nullptr)
    return fail_channel(channel, Errc::peer_closed, "its receive channel (on this rank) was closed",
                        "close the send channel too");
  auto slot = channel.position_of(sequence);
  auto buffer = static_cast<std::uint32_t>(sequence % channel.buffer_count());
  if (length > 0)
    std::memcpy(target->buffer_at(slot) + offset, channel.buffer_at(buffer) + offset, length);
  ++stats_.send_copies;
  ++stats_.data_writes;
  land(*target, {target->id, slot, value});
  return Status::done;
}

// One receive channel owing `rank` credits stored directly has them carried in the flag
// line of this direct store to it; any other stores its credit word now, ahead of the line.
std::uint64_t ChannelRegistry::carry_owed_credits(int rank) noexcept {
  std::uint64_t carried = 0;
  for (ChannelState* owing : owing_credits_) {
    ReceiveProgress& receive = owing->receive;
    if (owing->direct_credit == nullptr || owing->shape.peer != rank || receive.unreported == 0 || owing->closed ||
        owing->phase != Phase::ready)
      continue;
    if (carried != 0) {
      return_credits(*owing);
      continue;
    }
    carried = carry_bits(owing->peer_channel_id, receive.released);
    receive.unreported = 0;
    ++stats_.piggybacked_credits;
  }
  return carried;
}

// Progresses only when something is still on its way.
Status ChannelRegistry::test_sent(ChannelState& channel) noexcept {
  Status status = sent_state(channel);
  if (status != Status::posted) return status;
  engine_.progress();
  return sent_state(channel);
}

Status ChannelRegistry::sent_state(ChannelState& channel) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  finish_split(channel);
  if (channel.phase == Phase::failed) return failed(channel);
  if (channel.send.partitions_left > 0)
    return refuse(channel, Errc::invalid_argument,
                  fmt::format("waiting for a message with {} partitions not ready", channel.send.partitions_left),
                  "call ready() for every partition first");
  set_waiting(channel, channel.send.writes_in_flight > 0);
  return channel.send.writes_in_flight == 0 ? Status::done : Status::posted;
}

bool ChannelRegistry::wait_for_writes(ChannelState& channel, std::chrono::nanoseconds timeout) noexcept {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    engine_.progress();
    {
      std::lock_guard lock(engine_.progress_mutex());
      finish_split(channel);
      if (channel.send.writes_in_flight == 0 || channel.phase == Phase::failed) return channel.send.writes_in_flight == 0;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace tether::persist
