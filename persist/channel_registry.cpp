// The registry's frame: one per Runtime, the channel table, refusals and failures, and
// the engine hooks that route completions to their channel.
#include "persist/channel_registry.hpp"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/stats.hpp"

namespace tether::persist {
namespace {

std::mutex g_registry_creation;

// What this side counts for its close notice: messages started whole (a message whose
// partitions are not all ready will never land), or taken.
std::uint64_t count_at_close(const ChannelState& channel) noexcept {
  if (channel.role == Role::receive) return channel.receive.delivered;
  return channel.send.started - (channel.send.partitions_left > 0 ? 1 : 0);
}

// A TETHER_INJECT_* option's N (which operation fails), 0 when unset or negative.
std::uint64_t injection_count(const config::Config& config, const char* name) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, config.integer(name)));
}

}  // namespace

ChannelRegistry& ChannelRegistry::of(Runtime& runtime) {
  messaging::Engine& engine = runtime.engine();
  std::lock_guard lock(g_registry_creation);
  if (auto* registry = dynamic_cast<ChannelRegistry*>(engine.channel_events())) return *registry;
  auto registry = std::make_unique<ChannelRegistry>(engine);
  ChannelRegistry& made = *registry;
  std::lock_guard progress(engine.progress_mutex());
  engine.set_channel_events(std::move(registry));
  return made;
}

ChannelRegistry::ChannelRegistry(messaging::Engine& engine)
    : engine_(engine), direct_stores_to_(static_cast<std::size_t>(engine.size()), 0) {
  const auto& config = config::Config::global();
  credit_batch_ = static_cast<std::uint32_t>(std::max<std::int64_t>(0, config.integer("TETHER_CHANNEL_CREDIT_BATCH")));
  connect_timeout_ = config.duration("TETHER_CHANNEL_CONNECT_TIMEOUT");
  close_timeout_ = config.duration("TETHER_CHANNEL_CLOSE_TIMEOUT");
  std::size_t room = engine.receive_buffer_bytes() - messaging::kChannelHeaderBytes;
  inline_max_ = static_cast<std::uint32_t>(std::min<std::size_t>(config.size_bytes("TETHER_CHANNEL_INLINE_MAX"), room));
  l2_bytes_ = transport::shm::l2_cache_bytes();
  split_from_ = config.size_bytes("TETHER_CHANNEL_SPLIT_COPY");
  inject_write_failure_ = injection_count(config, "TETHER_INJECT_CHANNEL_WRITE_FAILURE");
  std::string_view inject_at = config.choice("TETHER_INJECT_WRITE_FAILURE_AT");
  inject_at_ = inject_at == "post"         ? InjectAt::post
               : inject_at == "completion" ? InjectAt::completion
                                           : InjectAt::after_close;
  inject_credit_failure_ = injection_count(config, "TETHER_INJECT_CREDIT_FAILURE");
  inject_corrupt_flag_ = injection_count(config, "TETHER_INJECT_CORRUPT_FLAG");
  inject_corrupt_credit_ = injection_count(config, "TETHER_INJECT_CORRUPT_CREDIT");
}

ChannelRegistry::~ChannelRegistry() {
  if (failure_after_close_)
    log::info("persist", "the write failure held by TETHER_INJECT_WRITE_FAILURE_AT=after-close was never delivered: "
              "its channel was not closed");
  std::size_t open = 0;
  std::size_t kept = 0;
  for (auto& channel : channels_) {
    if (!channel->closed) ++open;
    if (!peer_may_store(*channel)) {
      release_keys(*channel);
      release_memory(*channel);
      continue;
    }
    release_registration(*channel);
    release_keys(*channel);  // after the engine's shutdown fence: the peer is done with it
    ++kept;
  }
  if (kept > 0)
    log::info("persist", "{} channels' pool memory stays reserved: their live peers may still store into it",
              kept);
  if (open > 0)
    log::warn("persist", "{} channels were still open when the runtime ended; destroy channels before the Runtime",
              open);
  user_cache_.reset();
}

// A live peer may store into a channel's slots, flags or credit word until it exits or
// the transport closes, which comes after this registry: on the direct path it maps
// this rank's memory, with arena keys it may write anywhere it could, elsewhere its writes
// may be on the wire. Closing the channel's own registrations (TETHER_REMOTE_KEYS=exact)
// makes later writes fail at the peer, but a software provider may still be landing one
// that passed the key check earlier. Such memory never goes back to the pool.
bool ChannelRegistry::peer_may_store(const ChannelState& channel) const noexcept {
  return !channel.self && !engine_.peer_dead(channel.shape.peer);
}

Status ChannelRegistry::refuse(ChannelState& channel, Errc code, std::string cause, std::string remedy) noexcept {
  try {
    channel.last_error = Error{code, 0, std::move(cause), std::move(remedy)};
  } catch (...) {
    channel.last_error.code = code;
  }
  return Status::error;
}

void ChannelRegistry::change_waiting(ChannelState& channel, bool waiting) noexcept {
  channel.watching_peer = waiting;
  if (waiting) engine_.watch_peer(channel.shape.peer);
  else engine_.unwatch_peer(channel.shape.peer);
}

Status ChannelRegistry::fail_channel(ChannelState& channel, Errc code, std::string cause, std::string remedy) noexcept {
  if (channel.phase == Phase::failed) return failed(channel);
  channel.phase = Phase::failed;
  set_waiting(channel, false);
  try {
    channel.failure = Error{code, 0,
                            fmt::format("{} channel with rank {} (tag {}): {}", role_name(channel.role),
                                        channel.shape.peer, channel.shape.tag, cause),
                            std::move(remedy)};
  } catch (...) {
    channel.failure.code = code;
  }
  if (code == Errc::peer_closed) log::warn("persist", "{}", channel.failure.message());  // the peer's choice
  else log::error("persist", "{}", channel.failure.message());
  return failed(channel);
}

Status ChannelRegistry::fail_channel_and_tell_peer(ChannelState& channel, Errc code, std::string cause,
                                                   std::string remedy) noexcept {
  const bool already_failed = channel.phase == Phase::failed;
  Status status = fail_channel(channel, code, std::move(cause), std::move(remedy));
  // A peer the error calls unreachable would not hear it.
  if (already_failed || code == Errc::peer_unreachable || code == Errc::timeout) return status;
  channel.failure_notice = code == Errc::ok ? Errc::transport : code;
  send_notices_when_due(channel);
  return status;
}

// A post of this side's own failed: the transport's error, told to the peer's side.
Status ChannelRegistry::fail_on_transport_error(ChannelState& channel) noexcept {
  const Error& error = engine_.transport().last_error();
  return fail_channel_and_tell_peer(channel, error.code, error.cause, error.remedy);
}

// Notices that must not overtake this side's writes in flight (a failure, a close
// acknowledgement) go once those are done.
void ChannelRegistry::send_notices_when_due(ChannelState& channel) noexcept {
  if (channel.send.writes_in_flight != 0) return;
  send_failure_notice(channel);
  send_close_ack(channel);
}

// A send side whose receive side closed answers once its last write ended: a receive side
// on the user's memory waits for that before the memory is the user's again.
void ChannelRegistry::owe_close_ack(ChannelState& channel) noexcept {
  if (channel.role != Role::send || channel.self) return;
  channel.close_ack_due = true;
  send_notices_when_due(channel);
}

void ChannelRegistry::send_close_ack(ChannelState& channel) noexcept {
  if (!std::exchange(channel.close_ack_due, false) || engine_.peer_dead(channel.shape.peer)) return;
  if (!engine_.send_channel_word(channel.shape.peer, encode({channel.peer_channel_id, kClosedAckSlot, 0})))
    log::warn("persist", "rank {} was not told that its closed receive channel (tag {}) gets no more writes: its "
              "close waits TETHER_CHANNEL_CLOSE_TIMEOUT (raise TETHER_POOL_MAX if the pool ran out)",
              channel.shape.peer, channel.shape.tag);
}

// Receive sides on pool memory wait for no acknowledgement and are gone when theirs comes:
// not counted as late.
void ChannelRegistry::on_close_acked(int source, std::uint64_t bits) noexcept {
  if (closed_since(decode_notification(bits).channel_id)) return;
  ChannelState* channel = channel_of_message(source, bits);
  if (channel == nullptr) return;  // rejected
  if (channel->role != Role::receive || !channel->close_notice_sent)
    return reject("an unasked close acknowledgement", bits);
  channel->close_acked = true;
}

// At once: close() calls it too, since a closed channel hears of no more completions.
void ChannelRegistry::send_failure_notice(ChannelState& channel) noexcept {
  if (channel.failure_notice == Errc::ok) return;
  Errc code = std::exchange(channel.failure_notice, Errc::ok);
  if (channel.self || channel.peer_channel_id == 0 || engine_.peer_dead(channel.shape.peer)) return;
  if (!engine_.send_channel_word(channel.shape.peer,
                                 encode({channel.peer_channel_id, kFailureSlot, static_cast<std::uint32_t>(code)})))
    log::warn("persist", "rank {} was not told that its {} channel's peer failed", channel.shape.peer,
              role_name(channel.role == Role::send ? Role::receive : Role::send));
}

// The peer's side of a channel failed and said so: this side fails with its code.
void ChannelRegistry::on_peer_side_failed(int source, std::uint64_t bits) noexcept {
  ChannelState* channel = channel_of_message(source, bits);
  if (channel == nullptr) return;  // closed since (counted), or rejected
  Notification notification = decode_notification(bits);
  if (!messaging::is_error_code(notification.value)) return reject("a failure notice without a known error code", bits);
  auto code = static_cast<Errc>(notification.value);
  (void)fail_channel(*channel, code,
                     fmt::format("rank {}'s side of it failed ({}) and said so: nothing more will come from it",
                                 source, errc_name(code)),
                     fmt::format("rank {}'s log says why; close the channel on both ranks and create it again",
                                 source));
}

// Closing a connected channel tells the peer's side, so that it fails once nothing more
// can come or be read instead of waiting for ever on a live peer. A failed channel's peer
// was told already, and a peer that closed first needs no answer.
void ChannelRegistry::send_close_notice(ChannelState& channel) noexcept {
  if (channel.phase != Phase::ready || channel.peer_closed || channel.peer_channel_id == 0) return;
  std::uint64_t count = count_at_close(channel);
  if (channel.self) {
    if (ChannelState* other = find(channel.peer_channel_id)) note_peer_closed(*other, count);
    return;
  }
  if (engine_.peer_dead(channel.shape.peer)) return;
  bool asks_ack = channel.role == Role::receive && !channel.memory_from_pool;
  channel.close_notice_sent = engine_.send_channel_word(
      channel.shape.peer, encode({channel.peer_channel_id, asks_ack ? kClosedAskingAckSlot : kClosedSlot,
                                  static_cast<std::uint32_t>(count)}));
  if (!channel.close_notice_sent)
    log::info("persist", "rank {} was not told that its channel's peer (tag {}) closed", channel.shape.peer,
              channel.shape.tag);
}

// The peer closed its side after starting (or taking) `value` messages, low 32 bits.
void ChannelRegistry::on_peer_closed(int source, std::uint64_t bits) noexcept {
  ChannelState* channel = channel_of_message(source, bits);
  if (channel == nullptr) return;  // closed (counted) or rejected
  if (decode_notification(bits).slot == kClosedAskingAckSlot) owe_close_ack(*channel);
  if (channel->phase == Phase::failed) return;  // failed here
  if (channel->peer_closed) return reject("a second close notice", bits);
  auto count = peer_count_at_close(channel->role, count_at_close(*channel), decode_notification(bits).value,
                                   channel->shape.slots);
  if (!count) return reject("a close notice more than a slot count from this side's count", bits);
  note_peer_closed(*channel, *count);
}

void ChannelRegistry::note_peer_closed(ChannelState& channel, std::uint64_t count) noexcept {
  channel.peer_closed = true;
  channel.peer_closed_count = count;
  if (channel.role == Role::send && count < channel.send.started)
    log::warn("persist", "rank {} closed its receive channel (tag {}) without taking the last {} of the {} messages "
              "this side started", channel.shape.peer, channel.shape.tag, channel.send.started - count,
              channel.send.started);
}

// Once a closed peer could read nothing more (a send side) or has nothing more to send (a
// receive side that took all): the channel fails instead of waiting.
Status ChannelRegistry::fail_as_peer_closed(ChannelState& channel) noexcept {
  constexpr const char* kRemedy = "close this side too; to go on, create a new pair of channels on both ranks";
  if (channel.role == Role::send)
    return fail_channel(channel, Errc::peer_closed,
                        fmt::format("rank {} closed its receive side (messages it took: {}): nothing sent now "
                                    "would be read", channel.shape.peer, channel.peer_closed_count),
                        kRemedy);
  return fail_channel(channel, Errc::peer_closed,
                      fmt::format("rank {} closed its send side (messages it started: {}, all taken here): no "
                                  "more will come", channel.shape.peer, channel.peer_closed_count),
                      kRemedy);
}

// TETHER_INJECT_CHANNEL_WRITE_FAILURE=N: this rank's N-th data write or message to a peer
// (not a direct store, not a copy to self) fails, once.
bool ChannelRegistry::channel_write_failure_injected() noexcept {
  if (inject_write_failure_ == 0 || write_failure_fired_ || remote_data_posts_ + 1 != inject_write_failure_)
    return false;
  write_failure_fired_ = true;
  return true;
}

// TETHER_INJECT_CREDIT_FAILURE=N: this rank's N-th credit message or write to a peer
// fails, once, at its post or its completion (TETHER_INJECT_WRITE_FAILURE_AT).
bool ChannelRegistry::credit_failure_injected() noexcept {
  if (inject_credit_failure_ == 0 || credit_failure_fired_ ||
      stats_.credit_messages + stats_.credit_writes + 1 != inject_credit_failure_)
    return false;
  credit_failure_fired_ = true;
  return true;
}

// At its post, the start fails; at its completion (TETHER_INJECT_WRITE_FAILURE_AT),
// the write is taken as posted, never reaches the peer, and completes with the error at
// the next progress pass.
Status ChannelRegistry::inject_write_failure(ChannelState& channel, std::uint64_t sequence) noexcept {
  constexpr const char* kRemedy = "unset TETHER_INJECT_CHANNEL_WRITE_FAILURE (it is for tests)";
  if (inject_at_ == InjectAt::post)
    return fail_channel_and_tell_peer(channel, Errc::transport,
                                      "a write failed: injected by TETHER_INJECT_CHANNEL_WRITE_FAILURE", kRemedy);
  std::uint32_t buffer = channel.buffer_of(sequence);
  const bool after_close = inject_at_ == InjectAt::after_close;
  const char* cause = after_close ? "injected by TETHER_INJECT_CHANNEL_WRITE_FAILURE after close"
                                  : "injected by TETHER_INJECT_CHANNEL_WRITE_FAILURE at completion";
  transport::Completion failed = injected_failure(channel, transport::CompletionKind::write_done,
                                                  operation_context(channel.id, false, buffer), cause);
  if (after_close) failure_after_close_ = failed;
  else engine_.complete_at_next_pass(failed);
  if (channel.ordered_landing) take_slot(channel, sequence, landing_slot_of(channel, sequence));
  ++channel.send.writes_in_flight;
  ++channel.send.buffer_writes[buffer];
  return Status::posted;
}

// At its post, the credit fails there; at its completion (TETHER_INJECT_WRITE_FAILURE_AT),
// it is taken as posted, never reaches the sender, and completes with the error at the next
// progress pass (on_credit_operation: a credit write fails the channel, a message is owed again).
void ChannelRegistry::inject_credit_failure(ChannelState& channel) noexcept {
  if (inject_at_ == InjectAt::post) {  // after-close: credits fail at their completion
    constexpr const char* kRemedy = "unset TETHER_INJECT_CREDIT_FAILURE (it is for tests)";
    (void)fail_channel_and_tell_peer(channel, Errc::transport,
                                     "credits failed: injected by TETHER_INJECT_CREDIT_FAILURE", kRemedy);
    return;
  }
  ReceiveProgress& receive = channel.receive;
  const bool message = channel.inline_max > 0;
  engine_.complete_at_next_pass(injected_failure(
      channel, message ? transport::CompletionKind::send_done : transport::CompletionKind::write_done,
      operation_context(channel.id, true, 0), "injected by TETHER_INJECT_CREDIT_FAILURE at completion"));
  receive.credit_message_busy = message;
  receive.credits_in_message = message ? static_cast<std::uint32_t>(receive.unreported) : 0;
  ++(message ? stats_.credit_messages : stats_.credit_writes);
  receive.unreported = 0;
}

// The error completion of this channel's operation `context` (a `kind` taken as posted), as
// a transport would report it.
transport::Completion ChannelRegistry::injected_failure(const ChannelState& channel, transport::CompletionKind kind,
                                                        std::uint64_t context, const char* cause) noexcept {
  transport::Completion failed;
  failed.kind = transport::CompletionKind::error;
  failed.failed_kind = kind;
  failed.error = Errc::transport;
  failed.peer = channel.transport_peer;
  failed.context = context;
  failed.cause = cause;
  return failed;
}

// TETHER_INJECT_WRITE_FAILURE_AT=after-close: the failed write of `channel`, held until
// close() gave up waiting for it, comes back at the next progress pass.
void ChannelRegistry::release_failure_held_for(const ChannelState& channel) noexcept {
  if (!failure_after_close_ || decode_context(failure_after_close_->context).channel_id != channel.id) return;
  engine_.complete_at_next_pass(*failure_after_close_);
  failure_after_close_.reset();
}

Status ChannelRegistry::failed(ChannelState& channel) noexcept {
  channel.last_error = channel.failure;
  return Status::error;
}

void ChannelRegistry::reject(const char* why, std::uint64_t notification) noexcept {
  ++stats_.rejected_notifications;
  log::error("persist", "rejected channel notification {:#x}: {}", notification, why);
}

void ChannelRegistry::on_peer_death(int rank) noexcept {
  for (auto& channel : channels_)
    if (!channel->closed && channel->shape.peer == rank && channel->phase != Phase::failed)
      (void)fail_channel(
          *channel, Errc::peer_unreachable, engine_.peer_failure(rank),
          engine_.failure_remedy(rank, "the channel cannot be used again; recreate it with a live peer"));
}

// A data write (or credit) of a channel ended. A send channel closed with writes in flight
// still hears how they end: one that fails tells the receiver (which would wait for it for
// ever on a live peer), and the last frees the channel's registration.
void ChannelRegistry::on_operation(const transport::Completion& completion) noexcept {
  OperationContext context = decode_context(completion.context);
  ChannelState* channel = find_even_closed(context.channel_id);
  if (channel == nullptr || (context.credit && channel->closed)) return;  // a credit of a channel closed since
  bool failed = completion.kind == transport::CompletionKind::error;
  if (context.credit) return on_credit_operation(*channel, completion);
  --channel->send.writes_in_flight;
  std::uint32_t buffer = context.buffer % channel->buffer_count();
  if (channel->send.buffer_writes[buffer] > 0) --channel->send.buffer_writes[buffer];
  std::uint64_t piggyback = std::exchange(channel->send.buffer_piggyback[buffer], 0);
  if (failed && piggyback != 0) owe_again(static_cast<std::uint32_t>(piggyback >> 32), static_cast<std::uint32_t>(piggyback));
  if (failed)
    (void)fail_channel_and_tell_peer(*channel, completion.error, fmt::format("a write failed: {}", completion.cause),
                                     "check that the peer is alive and its channel open");
  send_notices_when_due(*channel);
  if (channel->closed && channel->send.writes_in_flight == 0) release_registration(*channel);
}

// A credit message that failed is owed again; a credit write carries no count to owe
// again (several may be in flight), so its failure fails the channel and tells the sender.
void ChannelRegistry::on_credit_operation(ChannelState& channel, const transport::Completion& completion) noexcept {
  std::uint32_t credits = std::exchange(channel.receive.credits_in_message, 0);
  bool message = std::exchange(channel.receive.credit_message_busy, false);
  if (completion.kind != transport::CompletionKind::error) return;
  if (!message) {
    (void)fail_channel_and_tell_peer(channel, completion.error,
                                     fmt::format("a credit write failed: {}", completion.cause),
                                     "check that the peer is alive");
    return;
  }
  log::warn("persist", "credits to rank {} failed: {}", channel.shape.peer, completion.cause);
  owe_again(channel.id, credits);
}

void ChannelRegistry::on_notification(const transport::Completion& completion) noexcept {
  Notification notification = decode_notification(completion.notification);
  ChannelState* channel = find(notification.channel_id);
  if (channel == nullptr && closed_since(notification.channel_id)) {
    ++stats_.late_notifications;  // for a channel closed since: its memory is still reserved
    return;
  }
  if (channel == nullptr) return reject("no channel has that id", completion.notification);
  engine_.heard_from(channel->shape.peer);
  if (notification.slot == kCreditSlot) return take_credit(*channel, notification.value);
  land(*channel, notification);
}

// Credits below the batch wait a few passes for company, then go anyway: a sender
// waiting for them must never wait for ever.
void ChannelRegistry::on_progress() noexcept {
  ++progress_passes_;
  // In place: this runs on every progress pass and must not allocate.
  std::erase_if(owing_credits_, [this](ChannelState* channel) {
    if (channel->closed || channel->phase == Phase::failed || channel->receive.unreported == 0) return true;
    if (progress_passes_ - channel->receive.owed_since_pass < kPassesBeforeFlush) return false;
    return_credits(*channel);  // may owe again (back-pressure): then it is still unreported
    return channel->receive.unreported == 0;
  });
}


}  // namespace tether::persist

namespace tether {

ChannelStats channel_stats(Runtime& runtime) { return persist::ChannelRegistry::of(runtime).stats(); }

}  // namespace tether
