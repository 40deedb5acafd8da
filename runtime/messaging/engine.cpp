// The engine's frame: start-up, the command queue, progress, completions, test and wait.
#include "runtime/messaging/engine.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/base/cpus.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/yield.hpp"
#include "runtime/bootstrap/peer_health.hpp"

namespace tether::messaging {
namespace {

thread_local Error t_last_error;
constexpr std::string_view kAddressKey = "tether.address";
// What this rank's receive side takes, published next to its address: ranks started with
// different TETHER_EAGER_LIMIT or TETHER_EAGER_CREDITS keep to each other's.
constexpr std::string_view kLimitsKey = "tether.limits";
constexpr std::string_view kPeerFailureRemedy =
    "check that rank's host and the network to it; if it computes for longer than TETHER_PEER_TIMEOUT without "
    "calling the runtime, raise it or set TETHER_PROGRESS_THREAD=on";
struct ReceiveLimits {
  std::uint64_t receive_buffer_bytes;
  std::uint32_t eager_credits;  // lent to each peer
  std::uint32_t reserved;
};

transport::KeyScope key_scope(std::string_view choice) {
  if (choice == "arena") return transport::KeyScope::arena;
  return choice == "exact" ? transport::KeyScope::exact : transport::KeyScope::automatic;
}

// TETHER_RNDV_PROTOCOL: the protocol every rendezvous takes, or none (auto: per message).
std::optional<RendezvousProtocol> protocol_choice(std::string_view choice) {
  if (choice == "put") return RendezvousProtocol::put;
  if (choice == "get") return RendezvousProtocol::get;
  if (choice == "split") return RendezvousProtocol::split;
  return std::nullopt;
}

}  // namespace

EngineOptions EngineOptions::from_config() {
  const auto& config = config::Config::global();
  EngineOptions options;
  options.eager_limit_bytes = config.size_bytes("TETHER_EAGER_LIMIT");
  options.receive_buffers = static_cast<std::size_t>(config.integer("TETHER_EAGER_BUFFERS"));
  options.max_requests = static_cast<std::uint32_t>(config.integer("TETHER_MAX_REQUESTS"));
  options.chunk_bytes = config.size_bytes("TETHER_RNDV_CHUNK");
  options.eager_credits = static_cast<std::uint32_t>(std::clamp<std::int64_t>(config.integer("TETHER_EAGER_CREDITS"), 0, 1 << 20));
  options.rendezvous_protocol = protocol_choice(config.choice("TETHER_RNDV_PROTOCOL"));
  options.progress_thread = config.flag("TETHER_PROGRESS_THREAD");
  options.yield = std::string(config.choice("TETHER_YIELD"));
  options.peer_timeout = config.duration("TETHER_PEER_TIMEOUT");
  options.remote_keys = key_scope(config.choice("TETHER_REMOTE_KEYS"));
  options.inject_memlock_failure = config.flag("TETHER_INJECT_MEMLOCK_FAILURE");
  options.inject_write_failure =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, config.integer("TETHER_INJECT_WRITE_FAILURE")));
  options.inject_write_failure_at_completion = config.choice("TETHER_INJECT_WRITE_FAILURE_AT") == "completion";
  return options;
}

Engine::Engine(std::unique_ptr<Bootstrap> bootstrap, std::unique_ptr<transport::Transport> transport,
               const EngineOptions& options)
    : bootstrap_(std::move(bootstrap)),
      transport_(std::move(transport)),
      options_(options),
      rank_(bootstrap_->rank()),
      size_(bootstrap_->size()),
      requests_(options.max_requests),
      commands_(std::min(options.max_requests, kCommandsReserved)),
      peers_(static_cast<std::size_t>(size_)) {
  for (int i = 0; i < size_; ++i) dead_.push_back(std::make_unique<std::atomic<bool>>(false));
  dead_seen_.assign(static_cast<std::size_t>(size_), 0);
  for (PeerState& peer : peers_)  // until the peer's own are read
    peer.send_credits = peer.credits_granted = options_.eager_credits;
  const auto& limits = transport_->limits();
  std::size_t room = limits.max_message_bytes > sizeof(MessageHeader) ? limits.max_message_bytes - sizeof(MessageHeader) : 0;
  options_.eager_limit_bytes = std::min(options_.eager_limit_bytes, room);
  if (limits.max_rma_bytes > 0) options_.chunk_bytes = std::min(options_.chunk_bytes, limits.max_rma_bytes);
  // Room for an eager message, and for a channel message of as many bytes where the
  // transport allows (persist/channel_messages.cpp).
  std::size_t channel_message = std::min(kChannelHeaderBytes + options_.eager_limit_bytes, limits.max_message_bytes);
  inline_eager_bytes_ = std::min(kInlineEagerBytes, limits.inject_bytes);
  receive_buffer_bytes_ = std::max({sizeof(MessageHeader) + options_.eager_limit_bytes, channel_message, kControlMessageBytes});
  sends_per_progress_ = std::clamp<std::uint32_t>(options_.eager_credits / 4, 1, kMostSendsPerProgress);
}

// Deaths reported during the drain still count (a dead peer's queued messages are dropped
// instead of holding the drain for its whole 2 s), so the death callback goes only after it.
Engine::~Engine() {
  stopping_.store(true);
  if (progress_thread_.joinable()) progress_thread_.join();
  if (!drain(std::chrono::seconds(2)))
    log::warn("runtime", "rank {} shuts down with {} messages not yet delivered to the transport{}", rank_,
              backlog_.size() + bounces_in_flight_,
              transport_->holds_unsent() ? ", and frames the transport has not sent yet" : "");
  wait_for_peers_to_finish();
  bootstrap_->on_peer_death(nullptr);  // the PMIx event thread must not reach dead_ from now on
  transport_->read_messages_in_place(nullptr);
  channel_events_.reset();  // channels' registrations go before the transport does
  abandon_pending_requests();
  user_cache_.reset();  // its registrations go before the transport does
  transport_.reset();  // closes the endpoint: nothing lands in the receive buffers after this
  for (const Outgoing& unsent : backlog_) free_bounce(unsent.bounce);
  for (void* buffer : receive_buffers_) pinned_free(buffer);
}

// Requests still in flight give their keys and registrations back now, while the transport
// that made them is open (the request table outlives it).
void Engine::abandon_pending_requests() noexcept {
  std::size_t pending = requests_.pending_count();
  if (pending == 0) return;
  log::warn("runtime", "rank {} shuts down with {} requests still in flight; they are abandoned "
            "(wait for every request before the runtime ends)", rank_, pending);
  for (std::uint32_t i = 0; i < requests_.capacity(); ++i) {
    RequestSlot* slot = requests_.at(i);
    if (slot->state.load(std::memory_order_relaxed) == SlotState::pending) unexpose(slot);
  }
}

Expected<void> Engine::start() {
  auto attached = transport_->attach_pool();
  if (!attached) return attached;
  if (!control_reserve_.fill()) {
    Error pool = pinned_last_error();
    return make_error(pool.code, fmt::format("the engine's {} KiB of control message buffers: {}",
                                             ControlReserve::kSlots * ControlReserve::kSlotBytes / 1024, pool.cause),
                      pool.remedy);
  }
  for (std::size_t i = 0; i < options_.receive_buffers; ++i) {
    void* buffer = pinned_alloc(receive_buffer_bytes_, 64);
    if (buffer == nullptr) return tl::unexpected(pinned_last_error());
    receive_buffers_.push_back(buffer);
    Status posted = transport_->post_receive(buffer, receive_buffer_bytes_, nullptr,
                                             make_context(ContextKind::receive_buffer, i));
    if (posted == Status::error) return tl::unexpected(transport_->last_error());
  }
  transport_->read_messages_in_place(&in_place_reader_);
  auto address = transport_->address();
  auto put = bootstrap_->put(kAddressKey, address);
  if (!put) return put;
  ReceiveLimits limits{receive_buffer_bytes_, options_.eager_credits, 0};
  put = bootstrap_->put(kLimitsKey, std::as_bytes(std::span(&limits, 1)));
  if (!put) return put;
  // Deaths (and a lost server) from before the callback existed are replayed to it.
  bootstrap_->on_peer_death([this](int peer, std::string_view why) { note_death(peer, why); });
  auto published = bootstrap_->publish();
  if (!published) return published;
  choose_yield();
  if (options_.progress_thread)
    // Yields after every pass, unlike a waiting loop: sharing a core with the application,
    // this helper gives way to it (under EEVDF almost entirely) instead of taking half.
    progress_thread_ = std::thread([this] {
      while (!stopping_.load(std::memory_order_relaxed)) {
        progress();
        std::this_thread::yield();
      }
    });
  log::info("runtime", "rank {} of {} up on {}, eager limit {} B", rank_, size_, transport_->name(),
            options_.eager_limit_bytes);
  started_ = true;
  return {};
}

// A completed send has left this process, not necessarily reached its peer (over a lossy
// network TCP may still be retransmitting it), and closing the endpoint can discard it. So
// every rank that started cleanly waits here, progressing, until all ranks are here too.
// Skipped once a peer died or went silent: the fence would only wait for it to time out.
void Engine::wait_for_peers_to_finish() noexcept {
  if (!started_ || size_ == 1 || deaths_.load() > 0) return;
  auto fenced = bootstrap_->fence_while([this] { progress(); }, options_.peer_timeout);  // 0s: the bootstrap's
  if (!fenced)
    log::warn("runtime", "rank {} closes without knowing every peer finished: {}", rank_, fenced.error().cause);
}

// Called from the PMIx event thread.
void Engine::note_death(int peer, std::string_view why) noexcept {
  if (peer == PeerHealth::kEveryPeer) return note_server_lost(why);
  if (mark_dead(peer, fmt::format("rank {} died ({})", peer, why)))
    log::warn("runtime", "rank {} died ({}); requests to and from it fail", peer, why);
}

// The PMIx server is gone (PeerHealth logged it): every other rank counts as dead, so
// waits fail with that reason instead of live ranks waiting on each other for ever.
void Engine::note_server_lost(std::string_view why) noexcept {
  try {
    std::lock_guard lock(failure_reasons_mutex_);
    if (server_lost_reason_.empty()) server_lost_reason_ = why;
  } catch (...) {
  }
  for (int other = 0; other < size_; ++other)
    if (other != rank_) (void)mark_dead(other, {});
}

Expected<transport::PeerIndex> Engine::resolve(int peer_rank) {
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  if (peer.transport_peer != transport::kUnknownPeer) return peer.transport_peer;
  auto address = bootstrap_->get(peer_rank, kAddressKey);
  if (!address) return tl::unexpected(address.error());
  auto limits = bootstrap_->get(peer_rank, kLimitsKey);
  if (!limits) return tl::unexpected(limits.error());
  if (limits->size() != sizeof(ReceiveLimits))
    return make_error(Errc::invalid_argument,
                      fmt::format("rank {} published {} bytes of receive limits, not {}", peer_rank, limits->size(),
                                  sizeof(ReceiveLimits)),
                      "run the same tether version on every rank");
  auto inserted = transport_->insert_peer(*address);
  if (!inserted) return inserted;
  peer.transport_peer = *inserted;
  peer.offers_in_place = transport_->offers_messages_of(*inserted);
  adopt_limits(peer_rank, *limits);
  log::info("runtime", "rank {} reaches rank {} over {}", rank_, peer_rank, transport_->peer_transport_name(*inserted));
  return *inserted;
}

// The peer's receive buffers and credits, when they differ from this rank's, bound what
// this rank sends it (said once, naming the options).
void Engine::adopt_limits(int peer_rank, std::span<const std::byte> bytes) {
  ReceiveLimits limits;
  std::memcpy(&limits, bytes.data(), sizeof limits);
  PeerState& peer = peers_[static_cast<std::size_t>(peer_rank)];
  std::size_t room = limits.receive_buffer_bytes > sizeof(MessageHeader) ? limits.receive_buffer_bytes - sizeof(MessageHeader) : 0;
  peer.eager_limit = std::min(options_.eager_limit_bytes, room);
  peer.send_credits = peer.credits_granted = limits.eager_credits;
  if (peer.eager_limit != options_.eager_limit_bytes || limits.eager_credits != options_.eager_credits)
    log::warn("runtime",
              "rank {} takes eager messages up to {} B and lends {} credits (this rank: {} B, {}); sends to it keep "
              "to those: set TETHER_EAGER_LIMIT and TETHER_EAGER_CREDITS alike on every rank",
              peer_rank, room, limits.eager_credits, options_.eager_limit_bytes, options_.eager_credits);
}

// Oversubscribed (more ranks on this node than CPUs a rank may use): waiting loops yield
// on every poll, so the rank a waiter waits for gets the core. A rank cannot tell whether
// a one-CPU mask is its own (mpirun's binding) or shared (taskset, a one-CPU container):
// it assumes shared; launchers that bind exclusively say TETHER_YIELD=off.
void Engine::choose_yield() {
  int usable = std::max(1, static_cast<int>(base::allowed_cpus().size()));
  auto local_ranks = static_cast<int>(bootstrap_->identity().local_peers.size());
  bool every_poll = options_.yield == "on" || (options_.yield == "auto" && local_ranks > usable);
  base::g_polls_per_yield.store(every_poll ? 1 : 64, std::memory_order_relaxed);
  if (every_poll && options_.yield == "auto")
    log::info("runtime", "{} ranks on this node share {} CPUs: waiting calls yield on every poll (TETHER_YIELD)",
              local_ranks, usable);
}

Status Engine::refuse(Errc code, std::string cause, std::string remedy) noexcept {
  try {
    t_last_error = Error{code, 0, std::move(cause), std::move(remedy)};
  } catch (...) {
    t_last_error.code = code;
  }
  return Status::error;
}

const Error& Engine::last_error() const noexcept { return t_last_error; }

Status Engine::start_internal(RequestKind kind, void* buffer, std::size_t bytes, int peer, int tag,
                              Request& request) noexcept {
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  // Nothing started earlier waits (the count goes up before the push): start it here.
  auto may_start_here = [&] { return lock.owns_lock() && commands_queued_.load(std::memory_order_relaxed) == 0; };
  if (kind == RequestKind::send && may_start_here() && send_at_start(buffer, bytes, peer, tag, request)) {
    progress_after_some_sends();
    return Status::posted;
  }
  RequestSlot* slot = lock.owns_lock() ? requests_.acquire_locked(kind, request) : requests_.acquire(kind, request);
  if (slot == nullptr && !lock.owns_lock()) {  // the free slots may all sit in the lock holder's list
    lock.lock();
    slot = requests_.acquire_locked(kind, request);
  }
  if (slot == nullptr)
    return refuse(Errc::limit_exceeded, fmt::format("all {} requests are in flight", requests_.capacity()),
                  "wait for some, or raise TETHER_MAX_REQUESTS");
  slot->send_buffer = buffer;
  slot->receive_buffer = buffer;
  slot->buffer_bytes = bytes;
  slot->peer = peer;
  slot->tag = tag;
  slot->info.bytes = kind == RequestKind::send ? bytes : 0;
  if (may_start_here()) {
    run_command(slot);
    if (kind == RequestKind::send) progress_after_some_sends();
    else if (!backlog_.empty()) flush_backlog();  // a credit message the receive owed, say
    return Status::posted;
  }
  if (lock.owns_lock()) lock.unlock();
  commands_queued_.fetch_add(1);
  commands_.push(Command{request.slot});
  progress();
  return Status::posted;
}

// A request started with the progress lock free and no command queued makes no progress
// pass (test and wait make one while it is pending), except every sends_per_progress_-th
// send, which may finish inside its start (at start, or from a bounce buffer), so a rank
// that only sends still takes in credits. A pass per receive posted let a stream's
// messages arrive before most of their receives: tether-bw's 8 B and 8 KiB rates doubled
// without it.
void Engine::progress_after_some_sends() noexcept {
  if (++sends_since_progress_ < sends_per_progress_) return;
  sends_since_progress_ = 0;
  progress_locked();
}

bool Engine::drain(std::chrono::milliseconds timeout) noexcept {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    {
      std::lock_guard lock(progress_mutex_);
      if (backlog_.empty() && bounces_in_flight_ == 0 && commands_.empty() && !transport_->holds_unsent()) return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    progress();
  }
}

Status Engine::barrier() noexcept {
  constexpr int kBarrierTag = -2;
  char token = 0;
  for (int distance = 1; distance < size_; distance *= 2) {
    Request send, receive;
    char incoming = 0;
    if (start_internal(RequestKind::receive, &incoming, 1, (rank_ - distance + size_) % size_, kBarrierTag, receive) ==
            Status::error ||
        start_internal(RequestKind::send, &token, 1, (rank_ + distance) % size_, kBarrierTag, send) == Status::error)
      return Status::error;
    if (wait(send, nullptr) != Status::done || wait(receive, nullptr) != Status::done) return Status::error;
  }
  // This rank's last message may still wait in the transport (tcp-own: a connection still
  // opening): a caller that next blocks in another library (an MPI collective, a second
  // --comm mode of a halo app) would hold it back from its peer for good.
  auto longest = options_.peer_timeout.count() != 0 ? options_.peer_timeout : std::chrono::seconds(30);
  if (!drain(std::chrono::duration_cast<std::chrono::milliseconds>(longest)))
    return refuse(Errc::timeout, "the barrier's last message did not leave this rank in time",
                  "check the network to the next ranks, or raise TETHER_PEER_TIMEOUT");
  return Status::done;
}

Status Engine::start_send(const void* buffer, std::size_t bytes, int peer, int tag, Request& request) noexcept {
  if (peer < 0 || peer >= size_)
    return refuse(Errc::invalid_argument, fmt::format("send to rank {} in a job of {}", peer, size_),
                  fmt::format("pass a rank from 0 to {}", size_ - 1));
  if (tag < 0) return refuse(Errc::invalid_argument, fmt::format("send with tag {}", tag), "tags are >= 0");
  if (buffer == nullptr && bytes > 0)
    return refuse(Errc::invalid_argument, fmt::format("send of {} bytes from a null buffer", bytes),
                  "pass the buffer, or 0 bytes");
  if (dead_[static_cast<std::size_t>(peer)]->load())
    return refuse(Errc::peer_unreachable, failure_reason(peer), failure_remedy(peer, "stop sending to it"));
  return start_internal(RequestKind::send, const_cast<void*>(buffer), bytes, peer, tag, request);
}

Status Engine::start_receive(void* buffer, std::size_t bytes, int source, int tag, Request& request) noexcept {
  if (source != kAnySource && (source < 0 || source >= size_))
    return refuse(Errc::invalid_argument, fmt::format("receive from rank {} in a job of {}", source, size_),
                  fmt::format("pass a rank from 0 to {} or kAnySource", size_ - 1));
  if (tag < 0 && tag != kAnyTag)
    return refuse(Errc::invalid_argument, fmt::format("receive with tag {}", tag), "tags are >= 0 or kAnyTag");
  if (buffer == nullptr && bytes > 0)
    return refuse(Errc::invalid_argument, fmt::format("receive of {} bytes into a null buffer", bytes),
                  "pass the buffer, or 0 bytes");
  return start_internal(RequestKind::receive, buffer, bytes, source, tag, request);
}

Status Engine::finish_test(RequestSlot* slot, Request& request, MessageInfo* info, bool locked) noexcept {
  SlotState state = slot->state.load(std::memory_order_acquire);
  if (state == SlotState::pending) return Status::posted;
  if (info != nullptr) *info = slot->info;
  Errc error = slot->info.error;
  if (error != Errc::ok) (void)refuse_failed(slot, error);
  if (locked) requests_.release_locked(slot);
  else requests_.release(slot);
  request = Request{};
  return error == Errc::ok ? Status::done : Status::error;
}

Status Engine::refuse_failed(const RequestSlot* slot, Errc error) noexcept {
  if (error == Errc::peer_unreachable && slot->peer < 0 && size_ > 1) {
    int other = rank_ == 0 ? 1 : 0;  // every other rank is dead: any one says why
    return refuse(error,
                  fmt::format("receive from any rank failed: every other rank is gone ({})", failure_reason(other)),
                  failure_remedy(other, kPeerFailureRemedy));
  }
  if (error == Errc::peer_unreachable && slot->peer >= 0) {
    return refuse(error, fmt::format("{} with rank {} failed: {}", slot->kind == RequestKind::send ? "send" : "receive",
                                     slot->peer, failure_reason(slot->peer)),
                  failure_remedy(slot->peer, kPeerFailureRemedy));
  }
  return refuse(error, fmt::format("request failed: {}", errc_name(error)),
                error == Errc::truncated ? "post a receive buffer as large as the message" : "see the log for the peer");
}

Status Engine::test(Request& request, MessageInfo* info) noexcept {
  if (request.slot == kSentAtStart) return finish_sent_at_start(request, info);
  RequestSlot* slot = requests_.find(request);
  if (slot == nullptr)
    return refuse(Errc::invalid_argument, "the request is not in flight (finished and waited already, or never started)",
                  "wait or test each request until it reports done, once");
  if (slot->state.load(std::memory_order_acquire) == SlotState::pending) progress();
  return finish_test(slot, request, info);
}

// Polls in bursts under one taking of the progress lock, as many passes as a waiting loop
// makes between looks at the clock (base::YieldCountdown): a pass costs no lock and no
// request lookup.
Status Engine::wait(Request& request, MessageInfo* info) noexcept {
  if (request.slot == kSentAtStart) return finish_sent_at_start(request, info);
  RequestSlot* slot = requests_.find(request);
  if (slot == nullptr) return test(request, info);  // names the error
  auto waiting = [&] {
    return slot->state.load(std::memory_order_acquire) == SlotState::pending &&
           slot->generation.load(std::memory_order_relaxed) == request.generation;
  };
  base::YieldCountdown countdown;
  std::uint32_t looks = 0;
  for (;;) {
    std::unique_lock lock(progress_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      while (waiting() && countdown.left() > 0) {
        look_or_progress(countdown.yields_every_poll() ? nullptr : slot, ++looks);
        countdown.spend();
      }
    } else {
      countdown.spend();  // another thread polls: this try counts as one
    }
    if (!waiting()) {
      if (slot->generation.load(std::memory_order_relaxed) != request.generation) return test(request, info);
      return finish_test(slot, request, info, lock.owns_lock());
    }
    if (lock.owns_lock()) lock.unlock();
    countdown.yield_if_due();
  }
}

// The transport peer whose messages alone can finish `slot`, where the transport holds
// them in place: the receive is the oldest posted one and names its source (pairs keep
// their order, so that source's next message goes to it or to a later receive it matches
// better); kUnknownPeer otherwise. Progress lock held.
transport::PeerIndex Engine::sole_answerer(const RequestSlot* slot) const noexcept {
  if (slot == nullptr || slot->kind != RequestKind::receive || slot->peer < 0 || slot->peer == rank_ ||
      !posted_.first_is(slot))
    return transport::kUnknownPeer;
  const PeerState& peer = peers_[static_cast<std::size_t>(slot->peer)];
  return peer.offers_in_place ? peer.transport_peer : transport::kUnknownPeer;
}

// Looks are for a waiter that spins: one that yields on every poll (more ranks than CPUs)
// gains nothing from them, and makes a whole pass each time.
void Engine::look_or_progress(const RequestSlot* slot, std::uint32_t looks) noexcept {
  transport::PeerIndex answerer = sole_answerer(slot);
  if (answerer == transport::kUnknownPeer || looks % kLooksPerPass == 0) return progress_locked();
  if (!transport_->offer_message_from(answerer)) return;
  count_one(messages_taken_waiting_);
}

void Engine::progress() noexcept {
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  if (lock.owns_lock()) progress_locked();
}

void Engine::progress_locked() noexcept {
  Command command{};
  if (commands_queued_.load(std::memory_order_relaxed) != 0) {
    while (commands_.pop(command)) {
      commands_queued_.fetch_sub(1, std::memory_order_relaxed);
      run_command(requests_.at(command.slot));
    }
  }
  fail_requests_of_dead_peers();
  if (!backlog_.empty() || !waiting_writes_.empty()) flush_backlog();
  poll_transport();
  if (!injected_failures_.empty()) [[unlikely]] deliver_injected_failures();
  check_liveness();
  if (channel_events_) channel_events_->on_progress();
}

void Engine::run_command(RequestSlot* slot) noexcept {
  slot->started = true;
  watch_request(slot);
  if (slot->kind == RequestKind::receive) return post_receive(slot);
  if (slot->peer == rank_) return send_to_self(slot);
  send_to_peer(slot);
}

void Engine::fail_requests_of_dead_peers() noexcept {
  std::uint64_t deaths = deaths_.load(std::memory_order_acquire);
  if (deaths == deaths_applied_) return;
  deaths_applied_ = deaths;
  // One look at the flags for the backlog and the requests alike: a rank marked dead between
  // the two would have its send failed here with its backlog entry kept, which a later pass
  // would complete again after the request's slot was reused.
  for (int peer = 0; peer < size_; ++peer)
    dead_seen_[static_cast<std::size_t>(peer)] = dead_[static_cast<std::size_t>(peer)]->load() ? 1 : 0;
  drop_backlog_of_dead_peers();
  for (int peer = 0; peer < size_ && channel_events_; ++peer)
    if (dead_seen_[static_cast<std::size_t>(peer)] != 0) channel_events_->on_peer_death(peer);
  const bool no_rank_left = every_other_rank_dead();  // a receive from any rank would wait for ever
  for (std::uint32_t i = 0; i < requests_.capacity(); ++i) {
    RequestSlot* slot = requests_.at(i);
    if (slot->state.load(std::memory_order_acquire) != SlotState::pending || !slot->started) continue;
    if (slot->peer < 0 ? !no_rank_left : dead_seen_[static_cast<std::size_t>(slot->peer)] == 0) continue;
    if (posted_.contains(slot)) posted_.erase(slot);
    fail_for_dead_peer(slot, slot->tag);
  }
}

void Engine::fail_for_dead_peer(RequestSlot* slot, int tag) noexcept {
  std::string tag_text = tag == kAnyTag ? "any" : std::to_string(tag);
  if (slot->peer < 0)
    log::error("runtime", "a receive from any rank (tag {}) fails: every other rank is gone", tag_text);
  else
    log::error("runtime", "a {} with rank {} (tag {}) fails: {}", slot->kind == RequestKind::send ? "send" : "receive",
               slot->peer, tag_text, failure_reason(slot->peer));
  complete(slot, Errc::peer_unreachable);
}

// As the last dead-peer pass saw it (a death since is applied at the next pass, which also
// fails any receive from any rank posted meanwhile). This rank's own flag is never set.
bool Engine::every_other_rank_dead() const noexcept {
  return size_ > 1 && std::count(dead_seen_.begin(), dead_seen_.end(), 1) == size_ - 1;
}

void Engine::poll_transport() noexcept {
  std::size_t count = transport_->poll(poll_batch_);
  for (std::size_t i = 0; i < count; ++i) handle(poll_batch_[i]);
}

void Engine::handle(const transport::Completion& completion) noexcept {
  using transport::CompletionKind;
  switch (completion.kind) {
    case CompletionKind::receive:
      on_receive(completion);
      repost(completion.buffer, completion.context);
      return;
    case CompletionKind::send_done:
      if (context_kind(completion.context) == ContextKind::channel) return on_channel_operation(completion);
      --bounces_in_flight_;
      free_bounce(reinterpret_cast<void*>(context_value(completion.context)));
      return;
    case CompletionKind::write_done:
    case CompletionKind::read_done:
      if (context_kind(completion.context) == ContextKind::channel) return on_channel_operation(completion);
      on_chunk_done(completion);
      return;
    case CompletionKind::remote_write:
      if (completion.notification & kChannelNotificationBit) return on_channel_notification(completion);
      on_remote_write(completion);
      return;
    case CompletionKind::error:
      handle_error(completion);
      return;
  }
}

void Engine::deliver_injected_failures() noexcept {
  std::vector<transport::Completion> due;
  due.swap(injected_failures_);
  for (const transport::Completion& failed : due) handle(failed);
}

void Engine::handle_error(const transport::Completion& completion) noexcept {
  log::error("runtime", "transport error on {}: {} ({})", transport_->name(), completion.cause,
             errc_name(completion.error));
  on_transport_peer_error(completion);
  switch (context_kind(completion.context)) {
    case ContextKind::receive_buffer:
      if (completion.buffer != nullptr) repost(completion.buffer, completion.context);
      return;
    case ContextKind::send_bounce:
      --bounces_in_flight_;
      free_bounce(reinterpret_cast<void*>(context_value(completion.context)));
      return;
    case ContextKind::chunk_write:
    case ContextKind::chunk_read:
      if (RequestSlot* slot = chunk_slot(completion.context)) on_chunk_failed(slot, completion.error);
      return;
    case ContextKind::channel:
      on_channel_operation(completion);
      return;
  }
}

void Engine::on_channel_operation(const transport::Completion& completion) noexcept {
  if (channel_events_) channel_events_->on_operation(completion);
}

void Engine::on_channel_notification(const transport::Completion& completion) noexcept {
  if (channel_events_) return channel_events_->on_notification(completion);
  log::error("runtime", "dropped a channel notification {:#x}: no persistent channel exists here",
             completion.notification);
}

// The buffer's index travels in its context; a context that does not name it is looked up.
void Engine::repost(void* buffer, std::uint64_t context) noexcept {
  std::size_t index = context_kind(context) == ContextKind::receive_buffer ? context_value(context) : receive_buffers_.size();
  if (index >= receive_buffers_.size() || receive_buffers_[index] != buffer)
    index = static_cast<std::size_t>(std::find(receive_buffers_.begin(), receive_buffers_.end(), buffer) -
                                     receive_buffers_.begin());
  if (index == receive_buffers_.size()) return;
  Status status = transport_->post_receive(buffer, receive_buffer_bytes_, nullptr,
                                           make_context(ContextKind::receive_buffer, index));
  if (status == Status::error)
    log::error("runtime", "re-posting receive buffer {} failed: {}", index, transport_->last_error().message());
}

std::uint64_t Engine::chunk_context(ContextKind kind, const RequestSlot* slot) const noexcept {
  RequestId id = requests_.id_of(slot);
  return make_context(kind, (std::uint64_t{id.generation & 0xffffffU} << 32) | id.index);
}

RequestSlot* Engine::chunk_slot(std::uint64_t context) noexcept {
  std::uint64_t value = context_value(context);
  auto index = static_cast<std::uint32_t>(value);
  if (index >= requests_.capacity()) return nullptr;
  RequestSlot* slot = requests_.at(index);
  if ((slot->generation.load(std::memory_order_relaxed) & 0xffffffU) != (value >> 32)) return nullptr;
  return slot->state.load(std::memory_order_acquire) == SlotState::pending ? slot : nullptr;
}

}  // namespace tether::messaging
