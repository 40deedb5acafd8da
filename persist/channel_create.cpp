// Creation, the one handshake, and closing. Each side sends one hello naming its shape
// and where the peer writes (the receiver's slots, the sender's credit word) and receives
// the peer's; both check the shapes agree.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "persist/channel_registry.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/yield.hpp"

namespace tether::persist {

Expected<void> ChannelRegistry::check_shape(Role role, const ChannelShape& shape,
                                            std::span<std::byte> user_memory) const {
  const char* fix = "pass the values both sides agree on";
  if (shape.peer < 0 || shape.peer >= engine_.size())
    return make_error(Errc::invalid_argument, fmt::format("channel to rank {} in a job of {}", shape.peer, engine_.size()),
                      fmt::format("pass a rank from 0 to {}", engine_.size() - 1));
  if (shape.tag < 0 || shape.tag > kMaxChannelTag)
    return make_error(Errc::invalid_argument, fmt::format("channel tag {}", shape.tag),
                      fmt::format("channel tags run from 0 to {}", kMaxChannelTag));
  if (shape.slot_bytes == 0 || shape.slot_bytes > 0xffffffffULL)
    return make_error(Errc::invalid_argument, fmt::format("slot_bytes {}", shape.slot_bytes),
                      "slots hold 1 byte to 4 GiB - 1");
  if (shape.slots == 0 || shape.slots > kMaxChannelSlots)
    return make_error(Errc::invalid_argument, fmt::format("{} slots", shape.slots),
                      fmt::format("use 1 to {} slots", kMaxChannelSlots));
  if (shape.partitions > kMaxChannelPartitions)
    return make_error(Errc::invalid_argument, fmt::format("{} partitions", shape.partitions),
                      fmt::format("use 1 to {} partitions (each is one write and one notification)",
                                  kMaxChannelPartitions));
  if (shape.partitions == 0 || shape.partitions > shape.slot_bytes || shape.slot_bytes % shape.partitions != 0)
    return make_error(Errc::invalid_argument,
                      fmt::format("{} partitions of a {}-byte slot", shape.partitions, shape.slot_bytes),
                      "use a slot_bytes that is a multiple of partitions (1 for whole messages)");
  std::size_t needed = role == Role::send ? shape.slot_bytes : shape.slot_bytes * shape.slots;
  if (!user_memory.empty() && user_memory.size() < needed)
    return make_error(Errc::invalid_argument,
                      fmt::format("a {}-byte user buffer for a {} needing {} bytes", user_memory.size(), side(role), needed),
                      role == Role::send ? "pass a buffer of at least slot_bytes" : "pass at least slots x slot_bytes");
  std::size_t rma_limit = engine_.transport().limits().max_rma_bytes;
  if (rma_limit > 0 && shape.slot_bytes > rma_limit)
    return make_error(Errc::unsupported, fmt::format("slot_bytes {} exceeds the transport's RMA limit {}",
                                                     shape.slot_bytes, rma_limit), fix);
  return {};
}

Expected<ChannelState*> ChannelRegistry::create(Role role, const ChannelShape& shape, std::span<std::byte> user_memory) {
  if (auto checked = check_shape(role, shape, user_memory); !checked) return tl::unexpected(checked.error());
  auto channel = std::make_unique<ChannelState>();
  channel->role = role;
  if (connect_timeout_.count() > 0) channel->connect_deadline = Clock::now() + connect_timeout_;
  channel->shape = shape;
  channel->self = shape.peer == engine_.rank();
  if (auto paths = choose_paths(*channel, user_memory); !paths) return tl::unexpected(paths.error());
  if (auto memory = provide_memory(*channel, user_memory); !memory) {
    release_memory(*channel);
    return tl::unexpected(memory.error());
  }
  size_progress(*channel);
  ChannelState* made = channel.get();
  {
    std::lock_guard lock(engine_.progress_mutex());
    if (channels_.size() >= kMaxChannelId) {
      release_memory(*channel);
      return make_error(Errc::limit_exceeded, fmt::format("{} channels were created by this runtime", kMaxChannelId),
                        "reuse channels instead of creating one per message");
    }
    channels_.push_back(std::move(channel));
    made->id = static_cast<std::uint32_t>(channels_.size());
    ++stats_.channels_created;
    if (auto landing = describe_landing(*made); !landing) {
      made->closed = true;
      return tl::unexpected(landing.error());
    }
  }
  if (auto posted = post_handshake(*made); !posted) {
    made->closed = true;
    return tl::unexpected(posted.error());
  }
  return made;
}

// What the transport to the peer allows, decided at creation on both sides: the peer's
// first messages may land before its hello is read, and the send buffers are sized by it.
Expected<void> ChannelRegistry::choose_paths(ChannelState& channel, std::span<std::byte> user_memory) {
  if (channel.self) return {};
  std::lock_guard lock(engine_.progress_mutex());
  auto peer = engine_.peer_index(channel.shape.peer);
  if (!peer) return tl::unexpected(peer.error());
  channel.transport_peer = *peer;
  transport::Transport& transport = engine_.transport();
  bool whole_messages = channel.shape.partitions == 1;
  channel.ordered_landing = whole_messages && transport.delivers_in_order(*peer);
  bool sends_from_pool = channel.role == Role::send && whole_messages && user_memory.empty();
  // The direct path copies at start(): one send buffer serves every message.
  channel.one_send_buffer = sends_from_pool && transport.maps_peer_pool(*peer);
  // Small messages may go as channel messages: room for their header before each buffer.
  if (sends_from_pool && inline_max_ > 0 && transport.sends_beat_small_writes(*peer)) channel.buffer_prefix = kInlineRoom;
  return {};
}

void ChannelRegistry::size_progress(ChannelState& channel) {
  const ChannelShape& shape = channel.shape;
  channel.send.buffer_writes.assign(channel.buffer_count(), 0);
  channel.send.buffer_piggyback.assign(channel.buffer_count(), 0);
  channel.send.partition_sent.assign(shape.partitions, 0);
  channel.send.slot_of_position.assign(shape.slots, 0);
  channel.send.free_slots.resize(shape.slots);
  for (std::uint32_t slot = 0; slot < shape.slots; ++slot) channel.send.free_slots[slot] = shape.slots - 1 - slot;
  channel.receive.landing_slot.resize(shape.slots);
  for (std::uint32_t position = 0; position < shape.slots; ++position) channel.receive.landing_slot[position] = position;
  channel.receive.slot_held.assign(shape.slots, 0);
  channel.receive.landed_bytes.assign(shape.slots, 0);
  channel.receive.partitions_landed.assign(shape.slots, 0);
  channel.receive.partition_landed.assign(static_cast<std::size_t>(shape.slots) * shape.partitions, 0);
  channel.receive.complete.assign(shape.slots, 0);
}

Expected<void> ChannelRegistry::provide_memory(ChannelState& channel, std::span<std::byte> user_memory) {
  const ChannelShape& shape = channel.shape;
  auto* credit = static_cast<std::uint64_t*>(pinned_alloc(kCreditLineBytes, kCreditLineBytes));
  if (credit == nullptr) return tl::unexpected(pinned_last_error());
  std::memset(credit, 0, kCreditLineBytes);
  channel.credit_word = credit;
  if (channel.role == Role::receive) {
    std::size_t flag_bytes = channel.shape.slots * kFlagStride;
    channel.flags = static_cast<std::byte*>(pinned_alloc(flag_bytes, kFlagStride));
    if (channel.flags == nullptr) return tl::unexpected(pinned_last_error());
    std::memset(channel.flags, 0, flag_bytes);
  }
  channel.buffer_stride = shape.slot_bytes;
  if (!user_memory.empty()) return register_user_memory(channel, user_memory);
  if (channel.buffer_prefix > 0) channel.buffer_stride = (shape.slot_bytes + 63) / 64 * 64 + channel.buffer_prefix;
  channel.memory_bytes = channel.buffer_stride * (channel.one_send_buffer ? 1 : shape.slots);
  channel.memory = static_cast<std::byte*>(pinned_alloc(channel.memory_bytes, 64));
  if (channel.memory == nullptr) return tl::unexpected(pinned_last_error());
  channel.memory_from_pool = true;
  return {};
}

Expected<void> ChannelRegistry::register_user_memory(ChannelState& channel, std::span<std::byte> user_memory) {
  channel.memory = user_memory.data();
  channel.memory_bytes = channel.role == Role::send ? channel.shape.slot_bytes : channel.shape.slot_bytes * channel.shape.slots;
  if (channel.self) return {};
  std::lock_guard lock(engine_.progress_mutex());
  if (!user_cache_) {
    Registrar* registrars[] = {&engine_.transport().registrar()};
    RcacheOptions options = RcacheOptions::from_config();
    options.leave_pinned = false;  // no memory monitor here: never keep a range past its channel
    auto cache = RegistrationCache::create(registrars, std::move(options));
    if (!cache) return tl::unexpected(cache.error());
    user_cache_ = std::move(*cache);
  }
  auto handle = user_cache_->acquire(channel.memory, channel.memory_bytes, Access::all);
  if (!handle) return tl::unexpected(handle.error());
  if (handle->from_pool()) {
    channel.user_registration = std::move(*handle);
  } else if (handle->segment_count() == 1) {
    channel.user_registration = std::move(*handle);
    channel.registration = channel.user_registration.segment(0).registrations[0];
  } else {  // pieces of earlier entries: a peer needs one key, so register the range whole
    handle->release();
    auto whole = transport::register_pages(engine_.transport().registrar(), channel.memory, channel.memory_bytes);
    if (!whole) return tl::unexpected(whole.error());
    channel.registration = *whole;
    channel.registered_whole = true;
  }
  channel.descriptor = channel.registration.local_descriptor;
  channel.holds_user_registration = true;
  ++stats_.user_registrations;
  ++stats_.user_registrations_held;
  return {};
}

// The RemoteBuffer the peer needs (under the progress lock).
Expected<void> ChannelRegistry::describe_landing(ChannelState& channel) {
  void* target = channel.role == Role::receive ? static_cast<void*>(channel.memory) : channel.credit_word;
  std::size_t bytes = channel.role == Role::receive ? channel.memory_bytes : sizeof(std::uint64_t);
  ChannelHello& hello = channel.hello_out;
  auto& transport = engine_.transport();
  hello.role = channel.role;
  hello.channel_id = channel.id;
  hello.tag = channel.shape.tag;
  hello.slots = channel.shape.slots;
  hello.slot_bytes = channel.shape.slot_bytes;
  hello.partitions = channel.shape.partitions;
  hello.accepts_message_bytes = channel.self ? 0 : inline_max_;
  hello.landing_order = channel.landing_order();
  if (channel.self) {
    hello.landing = {reinterpret_cast<std::uint64_t>(target), 0, 0, bytes};
    return {};
  }
  if (channel.role == Role::receive) {
    auto flags = expose_words(channel, channel.flags, channel.shape.slots * kFlagStride);
    if (!flags) return tl::unexpected(flags.error());
    channel.flags_key = std::move(*flags);
    hello.flags = channel.flags_key.remote();
  }
  if (auto source = expose_source(channel); !source) return source;
  PoolLocation location;
  if (!pool_find(target, location)) {  // user memory: its one registration with the transport
    hello.landing = transport.describe_for(channel.transport_peer, channel.registration, target, bytes);
    return {};
  }
  auto landing = expose_words(channel, target, bytes);
  if (!landing) return tl::unexpected(landing.error());
  channel.landing_key = std::move(*landing);
  hello.landing = channel.landing_key.remote();
  return {};
}

// A send channel on the direct path names its buffer, from which a receiver waiting for a
// large message copies part of it (split copies; TETHER_CHANNEL_SPLIT_COPY).
Expected<void> ChannelRegistry::expose_source(ChannelState& channel) {
  if (channel.role != Role::send || !channel.one_send_buffer || !splits(channel.shape.slot_bytes)) return {};
  auto source = expose_words(channel, channel.buffer_at(0), channel.shape.slot_bytes, Access::remote_read);
  if (!source) return tl::unexpected(source.error());
  channel.source_key = std::move(*source);
  channel.hello_out.source = channel.source_key.remote();
  return {};
}

// A key to pool memory the peer writes (or reads): its own registration of just those
// bytes (TETHER_REMOTE_KEYS=exact, one-time cost at creation), or the arena's.
Expected<transport::ExposedRange> ChannelRegistry::expose_words(ChannelState& channel, void* address,
                                                                std::size_t bytes, Access access) {
  auto key = engine_.transport().expose_pool_range(channel.transport_peer, address, bytes, access,
                                                   engine_.remote_key_scope());
  if (key && key->has_own_registration()) ++stats_.key_registrations;
  return key;
}

Expected<void> ChannelRegistry::post_handshake(ChannelState& channel) {
  Role peer_role = channel.role == Role::send ? Role::receive : Role::send;
  using messaging::RequestKind;
  if (engine_.start_internal(RequestKind::receive, &channel.hello_in, sizeof channel.hello_in, channel.shape.peer,
                             hello_tag(channel.shape.tag, peer_role), channel.hello_receive) == Status::error ||
      engine_.start_internal(RequestKind::send, &channel.hello_out, sizeof channel.hello_out, channel.shape.peer,
                             hello_tag(channel.shape.tag, channel.role), channel.hello_send) == Status::error)
    return tl::unexpected(engine_.last_error());
  ++stats_.handshake_messages;
  return {};
}

// Past the channel's connect deadline a handshake still running is an error for the caller
// (a wait on it would otherwise wait for ever on a live peer), not a failed channel. The first
// time, the handshake gets a last look: one that needed only progress (a channel first used
// long after its creation) still connects.
Status ChannelRegistry::test_connected(ChannelState& channel) noexcept {
  if (channel.phase == Phase::ready) return Status::done;
  if (channel.phase == Phase::failed) return failed(channel);
  Status status = finish_handshake(channel);
  if (status != Status::posted || Clock::now() <= channel.connect_deadline) return status;
  if (!channel.connect_timed_out) status = handshake_until(channel, Clock::now() + kLastLookAtAHandshake);
  return status == Status::posted ? refuse_as_timed_out(channel) : status;
}

// finish_handshake until the handshake ends or `deadline` passed (posted). One pass at least.
Status ChannelRegistry::handshake_until(ChannelState& channel, Clock::time_point deadline) noexcept {
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    Status status = finish_handshake(channel);
    if (status != Status::posted || Clock::now() > deadline) return status;
  }
}

Status ChannelRegistry::refuse_as_timed_out(ChannelState& channel) noexcept {
  std::lock_guard lock(engine_.progress_mutex());
  if (channel.phase != Phase::connecting) return channel.phase == Phase::ready ? Status::done : failed(channel);
  channel.connect_timed_out = true;
  return refuse(channel, Errc::timeout,
                fmt::format("rank {} created no matching {} channel (tag {}) within TETHER_CHANNEL_CONNECT_TIMEOUT",
                            channel.shape.peer, channel.role == Role::send ? "receive" : "send", channel.shape.tag),
                "create the matching channel on the peer, or raise TETHER_CHANNEL_CONNECT_TIMEOUT");
}

// wait_connected gives the handshake the whole timeout from its call.
void ChannelRegistry::restart_connect_deadline(ChannelState& channel) noexcept {
  if (connect_timeout_.count() == 0 || channel.phase != Phase::connecting) return;
  channel.connect_deadline = Clock::now() + connect_timeout_;
  channel.connect_timed_out = false;
}

// Outside the progress lock: engine.test() progresses.
Status ChannelRegistry::finish_handshake(ChannelState& channel) noexcept {
  for (Request* request : {&channel.hello_send, &channel.hello_receive}) {
    if (!request->valid()) continue;
    Status status = engine_.test(*request, nullptr);
    if (status == Status::error) {
      std::lock_guard lock(engine_.progress_mutex());
      return fail_channel(channel, engine_.last_error().code, engine_.last_error().cause,
                          "the peer must be alive and create the matching channel");
    }
  }
  if (channel.hello_send.valid() || channel.hello_receive.valid()) return Status::posted;
  std::lock_guard lock(engine_.progress_mutex());
  if (channel.phase != Phase::connecting) return channel.phase == Phase::ready ? Status::done : failed(channel);
  auto accepted = accept_hello(channel);
  if (!accepted) return fail_channel(channel, accepted.error().code, accepted.error().cause, accepted.error().remedy);
  channel.peer_channel_id = channel.hello_in.channel_id;
  channel.peer_landing = channel.hello_in.landing;
  if (!channel.self) map_direct(channel);
  channel.inline_max = inline_limit(channel);
  channel.phase = Phase::ready;
  return Status::done;
}

// Where the transport maps the peer's pool memory, writes and credits become stores.
void ChannelRegistry::map_direct(ChannelState& channel) noexcept {
  transport::Transport& transport = engine_.transport();
  const ChannelShape& shape = channel.shape;
  if (channel.role == Role::receive) {
    channel.direct_credit = reinterpret_cast<std::uint64_t*>(
        transport.map_remote(channel.transport_peer, channel.peer_landing, sizeof(std::uint64_t)));
    channel.receive.stores_at_last_release = direct_stores_to_[static_cast<std::size_t>(shape.peer)];
    // The sender stores directly into pool slots of unpartitioned channels only (otherwise
    // its RMA writes complete through progress).
    std::atomic_ref(channel.stores_show_in_flags)
        .store(channel.direct_credit != nullptr && channel.memory_from_pool && shape.partitions == 1,
               std::memory_order_release);
    map_source(channel);
    return;
  }
  if (shape.partitions != 1) return;
  std::byte* slots = transport.map_remote(channel.transport_peer, channel.peer_landing, shape.slot_bytes * shape.slots);
  std::byte* flags = transport.map_remote(channel.transport_peer, channel.hello_in.flags, shape.slots * kFlagStride);
  if (slots == nullptr || flags == nullptr) {
    if (channel.one_send_buffer)
      log::info("persist", "channel {} to rank {}: the receiver's slots cannot be mapped (user memory?); its writes "
                "take turns on one send buffer", channel.id, shape.peer);
    return;
  }
  channel.direct_slots = slots;
  channel.direct_flags = flags;
}

// A receiver copies its share of split copies from the sender's buffer, where the sender
// named it (a direct-path sender with split copies on) and it maps here.
void ChannelRegistry::map_source(ChannelState& channel) noexcept {
  const transport::RemoteBuffer& source = channel.hello_in.source;
  if (source.length == 0 || split_from_ == 0) return;
  channel.direct_source = engine_.transport().map_remote(channel.transport_peer, source, channel.shape.slot_bytes);
  if (channel.direct_source == nullptr)
    log::info("persist", "channel {} from rank {}: the sender's buffer cannot be mapped; its split copies are "
              "copied by the sender alone", channel.id, channel.shape.peer);
}

Expected<void> ChannelRegistry::accept_hello(ChannelState& channel) const {
  return check_hello(channel.hello_in, channel.role, channel.shape, channel.landing_order());
}

Expected<void> ChannelRegistry::wait_connected(ChannelState& channel) {
  restart_connect_deadline(channel);
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    Status status = test_connected(channel);
    if (status == Status::done) return {};
    if (status == Status::error) return tl::unexpected(channel.last_error);
  }
}

// A channel closed before its handshake finished waits for it (as long as for writes in
// flight), so that the peer's side, connected or about to be, is told it closed instead of
// waiting for ever. One whose handshake a call reported timed out only looks once more.
void ChannelRegistry::finish_handshake_before_close(ChannelState& channel) noexcept {
  if (channel.phase != Phase::connecting) return;
  auto deadline = Clock::now() + (channel.connect_timed_out ? Clock::duration::zero() : close_timeout_);
  if (handshake_until(channel, deadline) != Status::posted) return;
  log::warn("persist", "{} channel with rank {} (tag {}) closed before rank {} created its matching channel; if it "
            "does, that channel is not told (create channels on both ranks before closing either)",
            role_name(channel.role), channel.shape.peer, channel.shape.tag, channel.shape.peer);
}

void ChannelRegistry::close(ChannelState& channel) noexcept {
  finish_handshake_before_close(channel);
  if (channel.role == Role::send && !wait_for_writes(channel, close_timeout_))
    log::warn("persist", "send channel to rank {} (tag {}) closed with {} writes in flight; its buffers stay "
              "registered until they end{}", channel.shape.peer, channel.shape.tag, channel.send.writes_in_flight,
              channel.phase == Phase::failed ? "" : ", and the receiver is told if one fails");
  std::unique_lock lock(engine_.progress_mutex());
  std::size_t unreleased = std::count(channel.receive.complete.begin(), channel.receive.complete.end(), 1);
  if (channel.role == Role::receive && unreleased > 0)
    log::warn("persist", "receive channel from rank {} (tag {}) closed with {} messages not released",
              channel.shape.peer, channel.shape.tag, unreleased);
  set_waiting(channel, false);
  send_notices_when_due(channel);  // else the last write in flight sends it (on_operation)
  send_close_notice(channel);
  lock.unlock();
  wait_for_close_ack(channel);
  lock.lock();
  channel.closed = true;  // pool memory stays until the runtime ends: the peer may still write
  if (channel.send.writes_in_flight == 0) release_registration(channel);
  release_failure_held_for(channel);
}

// A receive side on the user's memory gives it back only once the sender acknowledged the
// close notice, after its last write ended (the sender's next start() then fails): until
// then a write may still land there. Pool memory stays reserved instead, no wait.
void ChannelRegistry::wait_for_close_ack(ChannelState& channel) noexcept {
  if (channel.role != Role::receive || channel.memory_from_pool || !channel.close_notice_sent) return;
  auto deadline = Clock::now() + close_timeout_;
  auto answered = [&] {
    std::lock_guard lock(engine_.progress_mutex());
    return channel.close_acked || channel.peer_closed || channel.phase == Phase::failed ||
           engine_.peer_dead(channel.shape.peer);
  };
  for (base::YieldCountdown countdown; !answered(); countdown.after_poll()) {
    if (Clock::now() > deadline)
      return log::warn("persist", "receive channel from rank {} (tag {}) on your memory closed before that rank "
                       "acknowledged within TETHER_CHANNEL_CLOSE_TIMEOUT: a write it starts before it hears of the "
                       "close may still land there (keep the memory, or close the send side first)",
                       channel.shape.peer, channel.shape.tag);
    engine_.progress();
  }
}

// The peer's keys to the channel's pool memory stay valid while the peer may still write
// (a closed channel's in-flight writes must land, not vanish: libfabric shm answers a
// write to a closed key with nothing at all); they go with the registry otherwise.
void ChannelRegistry::release_registration(ChannelState& channel) noexcept {
  if (!peer_may_store(channel)) release_keys(channel);
  channel.user_registration.release();
  if (channel.registered_whole) engine_.transport().registrar().deregister(channel.registration);
  channel.registered_whole = false;
  if (std::exchange(channel.holds_user_registration, false)) --stats_.user_registrations_held;
}

void ChannelRegistry::release_keys(ChannelState& channel) noexcept {
  channel.landing_key.release();
  channel.flags_key.release();
  channel.source_key.release();
}

void ChannelRegistry::release_memory(ChannelState& channel) noexcept {
  if (channel.memory_from_pool && channel.memory != nullptr) pinned_free(channel.memory);
  if (channel.credit_word != nullptr) pinned_free(channel.credit_word);
  if (channel.flags != nullptr) pinned_free(channel.flags);
  channel.flags = nullptr;
  channel.memory = nullptr;
  channel.credit_word = nullptr;
  release_registration(channel);
}

}  // namespace tether::persist
