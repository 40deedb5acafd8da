// The progress engine: matching, eager sends, rendezvous (put and get), ordering per pair,
// dead peers. One thread progresses at a time (progress_mutex_); any thread may start
// requests, which reach the engine through a lock-free queue.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/messaging/control_reserve.hpp"
#include "runtime/messaging/progress_lock.hpp"
#include "runtime/messaging/request_table.hpp"
#include "runtime/messaging/wire.hpp"
#include "transport/transport.hpp"

namespace tether::messaging {

struct EngineOptions {
  std::size_t eager_limit_bytes = 8192;
  std::size_t receive_buffers = 64;
  std::uint32_t max_requests = 65536;
  std::size_t chunk_bytes = std::size_t{2} << 20;
  std::uint32_t eager_credits = 64;  // per peer (engine_credits.cpp)
  std::optional<RendezvousProtocol> rendezvous_protocol;  // TETHER_RNDV_PROTOCOL; none: auto
  bool progress_thread = false;
  std::string yield = "auto";  // auto | on | off (runtime/base/yield.hpp)
  std::chrono::nanoseconds peer_timeout{std::chrono::seconds(30)};  // 0: peers never time out
  transport::KeyScope remote_keys = transport::KeyScope::automatic;  // of pool memory handed to peers
  bool inject_memlock_failure = false;  // TETHER_INJECT_MEMLOCK_FAILURE (user_registrar())
  std::uint64_t inject_write_failure = 0;  // TETHER_INJECT_WRITE_FAILURE: that chunk write fails (0: none)
  bool inject_write_failure_at_completion = false;  // TETHER_INJECT_WRITE_FAILURE_AT: its completion, not its post

  static EngineOptions from_config();
};

// Context words of transport operations: what finished.
enum class ContextKind : std::uint64_t {
  receive_buffer = 1,
  send_bounce = 2,
  chunk_write = 3,
  chunk_read = 4,
  channel = 5,  // an operation of a persistent channel (persist/): routed to ChannelEvents
};
inline std::uint64_t make_context(ContextKind kind, std::uint64_t value) noexcept {
  return (static_cast<std::uint64_t>(kind) << 56) | (value & ((std::uint64_t{1} << 56) - 1));
}
inline ContextKind context_kind(std::uint64_t context) noexcept { return static_cast<ContextKind>(context >> 56); }
inline std::uint64_t context_value(std::uint64_t context) noexcept {
  return context & ((std::uint64_t{1} << 56) - 1);
}


// What persistent channels (persist/) hook into the engine. Every call comes from the
// thread that holds the progress lock, so implementations need no lock of their own.
class ChannelEvents {
 public:
  virtual ~ChannelEvents() = default;
  // A remote_write whose notification has kChannelNotificationBit set.
  virtual void on_notification(const transport::Completion& completion) noexcept = 0;
  // write_done, send_done or error of an operation posted with a ContextKind::channel context.
  virtual void on_operation(const transport::Completion& completion) noexcept = 0;
  // A decoded MessageKind::channel message (a channel's small message or credits).
  virtual void on_message(const DecodedMessage& message) noexcept = 0;
  virtual void on_peer_death(int rank) noexcept = 0;
  // Once per progress pass, after the transport was polled (retries of back-pressure).
  virtual void on_progress() noexcept = 0;
};

// A message that arrived before its receive was posted.
struct UnexpectedMessage {
  MessageHeader header;
  std::vector<std::byte> payload;    // eager
  RendezvousRequest rts{};           // rts
  RequestSlot* self_send = nullptr;  // a message to ourselves: the sender's request
};

// A sequenced message that arrived ahead of an earlier one from the same peer.
struct HeldMessage {
  std::vector<std::byte> bytes;
};

struct PeerState {
  transport::PeerIndex transport_peer = transport::kUnknownPeer;
  bool offers_in_place = false;  // the transport holds its messages in place (offer_message_from)
  std::uint32_t next_send_sequence = 0;
  std::uint32_t next_receive_sequence = 0;
  std::map<std::uint32_t, HeldMessage> held;  // out-of-order arrivals by sequence
  bool failed = false;                        // failure already applied to requests
  // Liveness (engine_liveness.cpp): requests waiting on this peer and when it last spoke.
  std::uint32_t waiting_requests = 0;
  bool watched = false;        // listed in Engine::watched_peers_
  bool watch_restarted = true; // heard_at must restart at the next check
  std::uint64_t heard_count = 0;       // messages and channel writes received from it
  std::uint64_t heard_count_seen = 0;  // at the last check
  std::chrono::steady_clock::time_point heard_at{};   // last check that saw something new
  std::chrono::steady_clock::time_point probed_at{};  // probe outstanding while > heard_at
  // Eager flow control (engine_credits.cpp). The peer's own limits (ReceiveLimits, read
  // when it is first reached) bound what this rank sends it.
  std::size_t eager_limit = 0;      // largest eager payload its receive buffers hold
  std::uint32_t send_credits = 0;   // credits this rank may still spend at the peer
  std::uint32_t credits_granted = 0;  // of the peer's: its TETHER_EAGER_CREDITS, what it lends this rank
  bool credits_exhausted = false;   // said so in the log since they ran out
  std::uint32_t credits_lent = 0;   // the peer's messages here that spent a credit, not yet given back
  std::uint32_t credits_owed = 0;   // of those, taken by a receive: given back with the next header
};

class Engine {
 public:
  Engine(std::unique_ptr<Bootstrap> bootstrap, std::unique_ptr<transport::Transport> transport,
         const EngineOptions& options);
  ~Engine();
  Expected<void> start();  // posts receive buffers, publishes the address

  [[nodiscard]] int rank() const noexcept { return rank_; }
  // Bytes of each posted receive buffer: the largest message that can arrive.
  [[nodiscard]] std::size_t receive_buffer_bytes() const noexcept { return receive_buffer_bytes_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] Bootstrap& bootstrap() noexcept { return *bootstrap_; }
  [[nodiscard]] transport::Transport& transport() noexcept { return *transport_; }

  Status start_send(const void* buffer, std::size_t bytes, int peer, int tag, Request& request) noexcept;
  Status start_receive(void* buffer, std::size_t bytes, int source, int tag, Request& request) noexcept;
  // Starts a request without checking its arguments; start_send/receive check first.
  // Internal traffic (barrier) uses tags below kAnyTag, which users cannot pass.
  Status start_internal(RequestKind kind, void* buffer, std::size_t bytes, int peer, int tag, Request& request) noexcept;
  Status test(Request& request, MessageInfo* info) noexcept;
  Status wait(Request& request, MessageInfo* info) noexcept;
  void progress() noexcept;
  void progress_locked() noexcept;  // the caller holds progress_mutex_
  [[nodiscard]] const Error& last_error() const noexcept;
  // Waits for every rank: a dissemination barrier over the engine's own messages, so
  // progress continues while it waits (a blocking PMIx fence would stall the transport).
  Status barrier() noexcept;
  // Progresses until every message this rank posted has left (or `timeout` passed).
  bool drain(std::chrono::milliseconds timeout) noexcept;

  // For persistent channels. The engine owns `events` and destroys it before the
  // transport. The caller of peer_index() and of transport posts holds progress_mutex().
  void set_channel_events(std::unique_ptr<ChannelEvents> events) noexcept { channel_events_ = std::move(events); }
  [[nodiscard]] ChannelEvents* channel_events() noexcept { return channel_events_.get(); }
  [[nodiscard]] ProgressLock& progress_mutex() noexcept { return progress_mutex_; }
  // Waiting loops that can see their own completion without a pass (a message in place, a
  // channel's flag line) look there and make a whole progress pass every this many polls.
  static constexpr std::uint32_t kLooksPerPass = 8;
  [[nodiscard]] Expected<transport::PeerIndex> peer_index(int peer_rank) { return resolve(peer_rank); }
  // A persistent channel waits on `peer_rank` (progress lock held): the peer is watched as
  // if a request waited on it (TETHER_PEER_TIMEOUT). Calls pair up, one unwatch per watch.
  void watch_peer(int peer_rank) noexcept;
  void unwatch_peer(int peer_rank) noexcept;
  // Something came from `peer_rank` besides an engine message (a channel's write or credit
  // landed): a sign of life, so no probe is due. Progress lock held.
  void heard_from(int peer_rank) noexcept {
    if (peer_rank >= 0 && peer_rank < size_ && peer_rank != rank_) ++peers_[static_cast<std::size_t>(peer_rank)].heard_count;
  }
  // Sends `peer_rank` a channel message with no payload carrying `word` (a channel
  // notification) in its credits place, as an engine control message (a bounce buffer, in
  // order behind this rank's other messages to it). false: no pinned memory for it (logged);
  // a post that fails later is logged only.
  // Progress lock held.
  [[nodiscard]] bool send_channel_word(int peer_rank, std::uint64_t word) noexcept;
  // Fault injection (tests): `failed` is handled as a completion at the next progress
  // pass. Progress lock held.
  void complete_at_next_pass(const transport::Completion& failed) noexcept;
  // Why `peer_rank` counts as dead: "rank 2 on host h3 is unreachable: ...".
  [[nodiscard]] std::string peer_failure(int peer_rank) const { return failure_reason(peer_rank); }
  // What to do about it: the lost launcher's remedy when that is why, else `otherwise`.
  [[nodiscard]] std::string failure_remedy(int peer_rank, std::string_view otherwise) const;
  [[nodiscard]] bool peer_dead(int peer_rank) const noexcept {
    return dead_[static_cast<std::size_t>(peer_rank)]->load(std::memory_order_relaxed);
  }
  // How far keys to pool memory handed to peers reach (TETHER_REMOTE_KEYS).
  [[nodiscard]] transport::KeyScope remote_key_scope() const noexcept { return options_.remote_keys; }
  // The key a pending rendezvous request handed its peer (its landing buffer, or a get's
  // source), empty when none: for tests of what that key reaches. Progress lock held.
  [[nodiscard]] transport::RemoteBuffer exposed_to_peer(const Request& request) noexcept;
  // The counters of the cache that registers user buffers of rendezvous (zero until used).
  [[nodiscard]] RcacheStats user_cache_stats() const noexcept { return user_cache_ ? user_cache_->stats() : RcacheStats{}; }
  // For tests of hostile input (tests/hostile): sends `bytes` unchecked, in order behind
  // earlier messages to `peer_rank`; with `take_sequence` the header's sequence field is
  // first set to the pair's next number. The caller holds progress_mutex().
  void post_raw(int peer_rank, std::span<const std::byte> bytes, bool take_sequence) noexcept;
  // Eager and control messages handed to the transport so far (handshakes included).
  [[nodiscard]] std::uint64_t messages_sent() const noexcept { return messages_sent_.load(std::memory_order_relaxed); }
  // Rendezvous receives (an RTS matched), and of those the ones that took the split
  // protocol (their sender wrote half, they read half).
  [[nodiscard]] std::uint64_t rendezvous_received() const noexcept {
    return rendezvous_received_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t split_rendezvous_received() const noexcept {
    return split_rendezvous_received_.load(std::memory_order_relaxed);
  }
  // Messages a posted receive took where the transport held them (shm-own's ring).
  [[nodiscard]] std::uint64_t messages_read_in_place() const noexcept {
    return messages_read_in_place_.load(std::memory_order_relaxed);
  }
  // Of those, the ones a wait's look took from the ring of the one rank its receive waits
  // on, without a whole progress pass (Transport::offer_message_from).
  [[nodiscard]] std::uint64_t messages_taken_waiting() const noexcept {
    return messages_taken_waiting_.load(std::memory_order_relaxed);
  }

 private:
  // Offers the engine each message the transport can hand over in place.
  class InPlaceReader final : public transport::MessageReader {
   public:
    explicit InPlaceReader(Engine& engine) noexcept : engine_(engine) {}
    [[nodiscard]] bool take(std::span<const std::byte> message) noexcept override {
      return engine_.take_in_place(message);
    }

   private:
    Engine& engine_;
  };

  struct Command {
    std::uint32_t slot;
  };

  // Request lifecycle (engine thread).
  void run_command(RequestSlot* slot) noexcept;
  void complete(RequestSlot* slot, Errc error) noexcept {
    if (slot->state.load(std::memory_order_relaxed) != SlotState::pending) return;
    if (slot->watched) unwatch_request(slot);
    unexpose(slot);
    slot->info.error = error;
    slot->state.store(error == Errc::ok ? SlotState::done : SlotState::failed, std::memory_order_release);
  }
  void progress_after_some_sends() noexcept;
  void fail_requests_of_dead_peers() noexcept;
  // Its peer is dead: peer_unreachable, logged with `tag` (a matched message's, or the request's).
  void fail_for_dead_peer(RequestSlot* slot, int tag) noexcept;
  [[nodiscard]] bool every_other_rank_dead() const noexcept;
  void note_death(int peer, std::string_view why) noexcept;
  void note_server_lost(std::string_view why) noexcept;
  void wait_for_peers_to_finish() noexcept;
  Status refuse(Errc code, std::string cause, std::string remedy) noexcept;
  // `locked`: the caller holds the progress lock.
  Status finish_test(RequestSlot* slot, Request& request, MessageInfo* info, bool locked = false) noexcept;
  Status refuse_failed(const RequestSlot* slot, Errc error) noexcept;
  // A wait for a receive only one peer can answer looks at that peer's next message in
  // place (Transport::offer_message_from) and makes a whole progress pass every
  // kLooksPerPass-th look (kLooksPerPass, public): other peers, credits, rendezvous,
  // liveness and queued starts still move.
  [[nodiscard]] transport::PeerIndex sole_answerer(const RequestSlot* slot) const noexcept;
  // One look of a waiting loop: at the next message of the peer that alone can finish
  // `slot` (nullptr: none), else a whole progress pass. Progress lock held.
  void look_or_progress(const RequestSlot* slot, std::uint32_t looks) noexcept;

  // Peer liveness: probes and TETHER_PEER_TIMEOUT (engine_liveness.cpp).
  using Clock = std::chrono::steady_clock;
  void watch_request(RequestSlot* slot) noexcept {
    if (!watchable(slot->peer)) return;  // the wildcard source, self
    slot->watched = true;
    count_waiter(slot->peer);
  }
  void unwatch_request(RequestSlot* slot) noexcept {
    slot->watched = false;
    --peers_[static_cast<std::size_t>(slot->peer)].waiting_requests;  // watched: a peer watch_request counted
  }
  void count_waiter(int peer_rank) noexcept;
  // Another rank of the job, with liveness on (TETHER_PEER_TIMEOUT 0s: never watched).
  [[nodiscard]] bool watchable(int peer_rank) const noexcept {
    return peer_rank >= 0 && peer_rank < size_ && peer_rank != rank_ && options_.peer_timeout.count() != 0;
  }
  void check_liveness() noexcept;
  void check_peer(int peer, Clock::time_point now) noexcept;
  void send_probe(int peer, MessageKind kind) noexcept;
  void on_probe(const DecodedMessage& message) noexcept;
  void on_transport_peer_error(const transport::Completion& completion) noexcept;
  void note_unreachable(int peer, std::string why) noexcept;
  void record_failure_reason(int peer, std::string why) noexcept;
  [[nodiscard]] std::string failure_reason(int peer) const;
  [[nodiscard]] std::optional<std::string> recorded_failure(int peer) const;
  [[nodiscard]] bool has_own_failure_locked(int peer) const noexcept;
  bool mark_dead(int peer, std::string reason) noexcept;
  [[nodiscard]] std::string describe_peer(int peer) const;

  // Sending (engine_send.cpp).
  void send_to_peer(RequestSlot* slot) noexcept;
  void send_eager(RequestSlot* slot, PeerState& peer) noexcept;
  // A small eager send the transport takes at once, started with the progress lock held
  // and nothing queued before it: no request slot, no liveness watch, no completion; the
  // request names kSentAtStart. false: it goes the general way (nothing was taken).
  bool send_at_start(const void* buffer, std::size_t bytes, int peer_rank, int tag, Request& request) noexcept;
  Status finish_sent_at_start(Request& request, MessageInfo* info) noexcept;
  MessageHeader write_eager(int peer_rank, int tag, std::uint32_t sequence, const void* buffer, std::size_t bytes,
                            std::byte* out) noexcept;
  void give_back_credits(int peer_rank, const MessageHeader& header) noexcept;
  Errc inject(int peer_rank, const std::byte* message, std::size_t length, RequestSlot* eager_request) noexcept;
  void withdraw(int peer_rank, const MessageHeader& header, RequestSlot* eager_request, Errc why) noexcept;
  void send_rts(RequestSlot* slot, PeerState& peer) noexcept;
  void send_to_self(RequestSlot* slot) noexcept;
  // Copies a message that starts with a MessageHeader to a bounce, gives back the credits
  // owed to the peer in it, and posts it.
  // Where a bounce buffer may come from: replies a peer waits for (CTS, FIN, refusals,
  // credits, probes) fall back on control_reserve_; what fails here alone (an eager send,
  // an RTS: the request fails with out_of_memory) takes pool memory only.
  enum class BounceSource : std::uint8_t { pool, pool_or_reserve };
  [[nodiscard]] bool post_control(int peer_rank, const void* bytes, std::size_t length,
                                  BounceSource source = BounceSource::pool_or_reserve) noexcept;
  std::byte* copy_to_bounce(int peer_rank, const void* bytes, std::size_t length,
                            BounceSource source = BounceSource::pool) noexcept;
  void free_bounce(void* bounce) noexcept;  // to the pool, or to control_reserve_
  struct Outgoing {
    int peer;
    std::byte* bounce;
    std::size_t length;
    RequestSlot* eager_request;
  };
  void post_bounce(int peer_rank, std::byte* bounce, std::size_t length, RequestSlot* eager_request) noexcept;
  Status try_send(const Outgoing& outgoing) noexcept;
  void flush_backlog() noexcept;
  void drop_backlog_of_dead_peers() noexcept;  // of ranks dead in dead_seen_
  Expected<transport::PeerIndex> resolve(int peer_rank);
  void adopt_limits(int peer_rank, std::span<const std::byte> bytes);
  void choose_yield();

  // Eager flow control (engine_credits.hpp inline, engine_credits.cpp the slow paths).
  inline bool may_send_eager(int peer_rank, std::size_t bytes) noexcept;
  inline void spend_credit(int peer_rank, MessageHeader& header) noexcept;
  inline void stamp_credits(int peer_rank, MessageHeader& header) noexcept;
  inline void take_back_credits(int source, std::uint32_t returned) noexcept;
  inline bool admit_eager(const MessageHeader& header) noexcept;
  [[nodiscard]] inline bool may_admit_eager(const MessageHeader& header) const noexcept;
  inline void owe_credit(const MessageHeader& header) noexcept;
  [[nodiscard]] inline bool owing_sends_credits(const MessageHeader& header) const noexcept;
  void note_credits_exhausted(int peer_rank) noexcept;
  void report_excess_credits(int source, std::uint32_t returned, std::uint32_t spent) const noexcept;
  void report_refused_eager(const MessageHeader& header) const noexcept;
  void send_owed_credits(int source) noexcept;

  // Receiving and matching (engine_match.cpp).
  void post_receive(RequestSlot* slot) noexcept;
  void on_receive(const transport::Completion& completion) noexcept;
  bool take_in_place(std::span<const std::byte> bytes) noexcept;
  void note_arrival(const MessageHeader& header) noexcept;
  void release_held(int source) noexcept;
  void dispatch(const DecodedMessage& message) noexcept;
  void deliver(const DecodedMessage& message) noexcept;
  RequestSlot* match_posted(int source, int tag) noexcept;
  void land_eager(RequestSlot* slot, const MessageHeader& header, std::span<const std::byte> payload) noexcept;
  void land_self(RequestSlot* receive, RequestSlot* send) noexcept;
  bool match_unexpected(RequestSlot* slot) noexcept;

  // Rendezvous (engine_rendezvous.cpp).
  void answer_rts(RequestSlot* receive, const MessageHeader& header, const RendezvousRequest& rts) noexcept;
  void refuse_rendezvous(RequestSlot* receive, const MessageHeader& header, Errc error) noexcept;
  void on_cts(const DecodedMessage& message) noexcept;
  void on_fin(const DecodedMessage& message) noexcept;
  void finish_get(RequestSlot* receive) noexcept;
  void finish_receive(RequestSlot* receive) noexcept;
  void on_remote_write(const transport::Completion& completion) noexcept;
  void on_channel_notification(const transport::Completion& completion) noexcept;
  void on_channel_operation(const transport::Completion& completion) noexcept;
  void on_chunk_done(const transport::Completion& completion) noexcept;
  // Posts the slot's remaining chunks; false when back-pressure stopped it.
  bool post_chunks(RequestSlot* slot) noexcept;
  void resume_writes() noexcept;
  Expected<transport::RemoteBuffer> expose(RequestSlot* slot, void* buffer, std::size_t bytes);
  Expected<transport::RemoteBuffer> expose_user_buffer(RequestSlot* slot, transport::PeerIndex peer, void* buffer,
                                                       std::size_t bytes);
  const Registration* expose_cached(RequestSlot* slot, void* buffer, std::size_t bytes) noexcept;
  RegistrationCache* user_cache() noexcept;
  Registrar& user_registrar() noexcept;  // the transport's, or TETHER_INJECT_MEMLOCK_FAILURE's
  void unexpose(RequestSlot* slot) noexcept {
    slot->pool_key.release();  // TETHER_REMOTE_KEYS=exact: the peer's key stops working here
    slot->cached.release();
    if (slot->registered) deregister_exposed(slot);
  }
  void deregister_exposed(RequestSlot* slot) noexcept;
  void abandon_pending_requests() noexcept;  // at shutdown, before the transport closes
  void* descriptor_of(RequestSlot* slot, const void* buffer) noexcept;
  RendezvousProtocol choose_protocol(int peer_rank, const void* buffer, std::size_t bytes) const noexcept;
  RequestSlot* in_flight(RequestId id, RequestKind kind, int peer_rank) noexcept;
  void fail_transfer(RequestSlot* slot, Errc error) noexcept;
  void on_chunk_failed(RequestSlot* slot, Errc error) noexcept;
  void abort_send(RequestSlot* send, Errc error) noexcept;
  void refuse_cts(RequestSlot* send, const ClearToSend& cts) noexcept;
  void on_abort(const DecodedMessage& message) noexcept;
  void finish_rendezvous_receive(RequestSlot* receive) noexcept;
  static std::uint64_t writes_still_coming(const RequestSlot& receive, std::uint64_t writes_landed) noexcept;
  Status post_write(RequestSlot* slot, transport::PeerIndex peer, std::size_t offset, std::size_t length,
                    Errc& error) noexcept;
  Status post_read(RequestSlot* slot, transport::PeerIndex peer, std::size_t offset, std::size_t length,
                   Errc& error) noexcept;
  Errc post_failure(int peer_rank) noexcept;  // logs the transport's error
  bool write_failure_injected() noexcept;
  Status fail_later(RequestSlot* slot) noexcept;
  void deliver_injected_failures() noexcept;
  void answer_split(RequestSlot* receive, const MessageHeader& header, const transport::RemoteBuffer& target) noexcept;

  // Completions (engine.cpp).
  void poll_transport() noexcept;
  void handle(const transport::Completion& completion) noexcept;
  void handle_error(const transport::Completion& completion) noexcept;
  void repost(void* buffer, std::uint64_t context) noexcept;
  std::uint64_t chunk_context(ContextKind kind, const RequestSlot* slot) const noexcept;
  RequestSlot* chunk_slot(std::uint64_t context) noexcept;

  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<transport::Transport> transport_;
  EngineOptions options_;
  int rank_;
  int size_;
  RequestTable requests_;
  // Starts that cannot run at once: another thread holds the progress lock, or earlier
  // starts wait here. Nodes for kCommandsReserved are made up front (one cache-aligned
  // allocation each: all TETHER_MAX_REQUESTS of them took 46 million instructions per
  // engine); beyond that a push allocates (never more nodes than request slots), and a
  // failed allocation there ends the process (std::bad_alloc in a noexcept start).
  static constexpr std::uint32_t kCommandsReserved = 1024;
  boost::lockfree::queue<Command> commands_;
  // Counted before the push, down after the pop: a pass with 0 skips the queue, and a start
  // that reads 0 with the lock held has no earlier command to overtake.
  std::atomic<std::uint32_t> commands_queued_{0};
  ProgressLock progress_mutex_;

  // Owned by the thread holding progress_mutex_.
  std::vector<PeerState> peers_;
  std::vector<void*> receive_buffers_;
  ControlReserve control_reserve_;
  std::size_t receive_buffer_bytes_ = 0;
  static constexpr std::size_t kInlineEagerBytes = 256;
  // A request finished when its send started; its generation holds the message's size.
  static constexpr std::uint32_t kSentAtStart = 0xfffffffeU;
  // Starts make no progress pass, but every so many sends make one (16, or a quarter of
  // the eager credits if fewer), so a rank that only sends still takes in credits and
  // other peers' messages.
  static constexpr std::uint32_t kMostSendsPerProgress = 16;
  std::uint32_t sends_per_progress_ = kMostSendsPerProgress;
  std::uint32_t sends_since_progress_ = 0;
  std::size_t inline_eager_bytes_ = 0;  // eager messages this small skip the bounce buffer
  PostedReceives posted_;
  std::deque<UnexpectedMessage> unexpected_;
  std::deque<Outgoing> backlog_;             // messages waiting for room, in order
  static constexpr std::size_t kPollBatch = 16;
  std::array<transport::Completion, kPollBatch> poll_batch_;  // poll_transport's, filled by the transport
  std::deque<RequestSlot*> waiting_writes_;  // rendezvous writes that met back-pressure
  std::vector<std::unique_ptr<std::atomic<bool>>> dead_;  // written by the PMIx event thread
  std::atomic<std::uint64_t> deaths_{0};
  std::uint64_t deaths_applied_ = 0;
  std::vector<char> dead_seen_;  // dead_ as fail_requests_of_dead_peers last read it, by rank

  std::vector<int> watched_peers_;           // peers with waiting requests (liveness)
  std::uint32_t passes_since_liveness_check_ = 0;
  mutable std::mutex failure_reasons_mutex_;  // note_death comes from the PMIx event thread
  std::vector<std::string> failure_reasons_;  // why a rank counts as dead, by rank
  std::string server_lost_reason_;  // set once the PMIx server is gone; under failure_reasons_mutex_

  std::size_t bounces_in_flight_ = 0;  // posted sends whose completion has not come back
  // Written under the progress lock only: one writer, so no locked add (count_one).
  std::atomic<std::uint64_t> messages_sent_{0};
  std::atomic<std::uint64_t> messages_read_in_place_{0};
  std::atomic<std::uint64_t> messages_taken_waiting_{0};
  std::uint64_t writes_posted_ = 0;    // rendezvous chunk writes (TETHER_INJECT_WRITE_FAILURE counts them)
  bool write_failure_fired_ = false;
  // TETHER_INJECT_WRITE_FAILURE_AT=completion (or a channel's after-close): due at the next pass
  std::vector<transport::Completion> injected_failures_;
  std::atomic<std::uint64_t> split_rendezvous_received_{0};
  std::atomic<std::uint64_t> rendezvous_received_{0};
  static void count_one(std::atomic<std::uint64_t>& counter) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  InPlaceReader in_place_reader_{*this};
  std::unique_ptr<ChannelEvents> channel_events_;
  std::unique_ptr<RegistrationCache> user_cache_;  // user buffers of rendezvous, over the transport
  bool user_cache_unavailable_ = false;

  std::atomic<bool> stopping_{false};
  bool started_ = false;  // start() succeeded: the shutdown fence has every rank to wait for
  std::thread progress_thread_;
};

}  // namespace tether::messaging
