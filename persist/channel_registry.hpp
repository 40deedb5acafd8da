// Every channel of one Runtime: ids, creation and the handshake, and the engine's hooks
// (notifications, write completions, peer deaths, credit retries). Owned by the engine,
// so it ends before the transport does.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "persist/channel_state.hpp"
#include "transport/shm/peer_copy.hpp"
#include "runtime/messaging/engine.hpp"

namespace tether::persist {

class ChannelRegistry final : public messaging::ChannelEvents {
 public:
  // The runtime's registry, made on first use.
  static ChannelRegistry& of(Runtime& runtime);
  explicit ChannelRegistry(messaging::Engine& engine);
  ~ChannelRegistry() override;

  // Set-up (channel_create.cpp).
  Expected<ChannelState*> create(Role role, const ChannelShape& shape, std::span<std::byte> user_memory);
  Status test_connected(ChannelState& channel) noexcept;
  Expected<void> wait_connected(ChannelState& channel);
  // The channel's connect deadline: TETHER_CHANNEL_CONNECT_TIMEOUT from now (wait_connected).
  void restart_connect_deadline(ChannelState& channel) noexcept;
  void finish_handshake_before_close(ChannelState& channel) noexcept;
  using Clock = std::chrono::steady_clock;
  void close(ChannelState& channel) noexcept;

  // Hot path (channel_send.cpp, channel_receive.cpp). Each takes the progress lock.
  Status next_buffer(ChannelState& channel, std::span<std::byte>& buffer) noexcept;
  Status free_buffer(ChannelState& channel, std::span<std::byte>& buffer) noexcept;
  [[nodiscard]] std::span<std::byte> next_buffer_span(ChannelState& channel) noexcept;
  Status start(ChannelState& channel, std::size_t bytes) noexcept;
  Status ready(ChannelState& channel, std::uint32_t partition) noexcept;
  Status test_sent(ChannelState& channel) noexcept;
  Status test_received(ChannelState& channel, std::span<const std::byte>& message) noexcept;
  Status wait_received(ChannelState& channel, std::span<const std::byte>& message) noexcept;
  bool arrived(ChannelState& channel, std::uint32_t partition) noexcept;
  Status release(ChannelState& channel) noexcept;

  [[nodiscard]] messaging::Engine& engine() noexcept { return engine_; }
  [[nodiscard]] ChannelStats stats() const noexcept { return stats_; }
  // The channel waits on its peer (a message, credits, writes), or no longer does: the
  // engine watches the peer meanwhile (TETHER_PEER_TIMEOUT). Progress lock held.
  void set_waiting(ChannelState& channel, bool waiting) noexcept {
    if (channel.watching_peer != waiting) change_waiting(channel, waiting);
  }

  // messaging::ChannelEvents (the progress lock is held).
  void on_notification(const transport::Completion& completion) noexcept override;
  void on_operation(const transport::Completion& completion) noexcept override;
  void on_message(const messaging::DecodedMessage& message) noexcept override;
  void on_peer_death(int rank) noexcept override;
  void on_progress() noexcept override;

 private:
  // channel_create.cpp
  Expected<void> check_shape(Role role, const ChannelShape& shape, std::span<std::byte> user_memory) const;
  Expected<void> choose_paths(ChannelState& channel, std::span<std::byte> user_memory);
  void size_progress(ChannelState& channel);
  Expected<void> provide_memory(ChannelState& channel, std::span<std::byte> user_memory);
  Expected<void> register_user_memory(ChannelState& channel, std::span<std::byte> user_memory);
  void release_registration(ChannelState& channel) noexcept;
  void release_keys(ChannelState& channel) noexcept;
  Expected<void> describe_landing(ChannelState& channel);
  Expected<transport::ExposedRange> expose_words(ChannelState& channel, void* address, std::size_t bytes,
                                                 Access access = Access::remote_write);
  Expected<void> expose_source(ChannelState& channel);
  Expected<void> post_handshake(ChannelState& channel);
  Status finish_handshake(ChannelState& channel) noexcept;
  Status handshake_until(ChannelState& channel, Clock::time_point deadline) noexcept;
  Status refuse_as_timed_out(ChannelState& channel) noexcept;
  // How long a handshake past its deadline is still looked at, the first time.
  static constexpr auto kLastLookAtAHandshake = std::chrono::milliseconds(100);
  Expected<void> accept_hello(ChannelState& channel) const;
  void map_direct(ChannelState& channel) noexcept;
  void map_source(ChannelState& channel) noexcept;
  void release_memory(ChannelState& channel) noexcept;
  [[nodiscard]] bool peer_may_store(const ChannelState& channel) const noexcept;

  // channel_send.cpp
  Status start_locked(ChannelState& channel, std::size_t bytes) noexcept;
  Status ready_locked(ChannelState& channel, std::uint32_t partition) noexcept;
  // Writes [offset, offset + length) of message `sequence` into the peer's slot.
  Status post_data_write(ChannelState& channel, std::uint64_t sequence, std::size_t offset, std::size_t length,
                         std::uint32_t value) noexcept;
  Status post_remote_data(ChannelState& channel, std::uint64_t sequence, std::size_t offset, std::size_t length,
                          std::uint32_t value) noexcept;
  Status copy_to_self(ChannelState& channel, std::uint64_t sequence, std::size_t offset, std::size_t length,
                      std::uint32_t value) noexcept;
  Status connected_or_retry(ChannelState& channel) noexcept;
  bool wait_for_writes(ChannelState& channel, std::chrono::nanoseconds timeout) noexcept;
  Status store_direct(ChannelState& channel, std::size_t bytes) noexcept;
  [[nodiscard]] bool splits(std::size_t bytes) const noexcept {
    return split_from_ > 0 && bytes >= split_from_ && bytes > kSplitPieceBytes;
  }
  Status copy_split_pieces(ChannelState& channel, std::uint32_t slot, std::uint32_t position,
                           std::size_t bytes) noexcept;
  void finish_split(ChannelState& channel) noexcept;
  void await_warm_slot(ChannelState& channel, std::size_t bytes) noexcept;
  [[nodiscard]] std::uint32_t next_free_slot(ChannelState& channel, std::uint64_t credits) noexcept;
  void take_slot(ChannelState& channel, std::uint64_t sequence, std::uint32_t slot) noexcept;
  [[nodiscard]] std::uint32_t landing_slot_of(ChannelState& channel, std::uint64_t sequence) noexcept;
  Status sent_state(ChannelState& channel) noexcept;
  [[nodiscard]] std::uint64_t credits_of(ChannelState& channel) noexcept;
  [[nodiscard]] static std::uint64_t known_credits(const ChannelState& channel) noexcept;

  // channel_receive.cpp
  void land(ChannelState& channel, const Notification& notification) noexcept;
  void record_landing(ChannelState& channel, const Notification& notification) noexcept;
  void record_ordered_landing(ChannelState& channel, const Notification& notification) noexcept;
  void check_flag(ChannelState& channel, std::uint32_t slot) noexcept;
  [[nodiscard]] bool join_split(ChannelState& channel, std::uint32_t position, std::uint64_t slot,
                                std::uint32_t length) noexcept;
  [[nodiscard]] static const char* split_refusal(const ChannelState& channel, std::uint32_t position,
                                                 std::uint32_t length) noexcept;
  [[nodiscard]] static std::uint64_t landed_slot_word(const ChannelState& channel, std::uint64_t sequence,
                                                      std::uint32_t& length) noexcept;
  void take_carried_credits(int from, std::uint64_t slot_word) noexcept;
  Status take_landed(ChannelState& channel, std::span<const std::byte>& message) noexcept;
  Status take_landed_before_failure(ChannelState& channel, std::span<const std::byte>& message) noexcept;
  bool valid_landing(const ChannelState& channel, const Notification& notification) noexcept;
  void take_credit(ChannelState& channel, std::uint32_t credits) noexcept;
  void return_credits(ChannelState& channel) noexcept;
  void owe_credits(ChannelState& channel) noexcept {
    if (channel.receive.unreported == 1) channel.receive.owed_since_pass = progress_passes_;
    if (std::find(owing_credits_.begin(), owing_credits_.end(), &channel) == owing_credits_.end())
      owing_credits_.push_back(&channel);
  }
  [[nodiscard]] bool credits_go_now(const ChannelState& channel, bool answered) const noexcept;
  void take_unread_carried_credits(int peer) noexcept;
  // Owed credits are returned after this many progress passes without a carrier.
  static constexpr std::uint64_t kPassesBeforeFlush = 16;
  // The slot-word bits carrying one receive channel's credits owed to `rank` (0: none owed).
  std::uint64_t carry_owed_credits(int rank) noexcept;

  // channel_messages.cpp: small messages and credits as sends (inline_max)
  [[nodiscard]] std::uint32_t inline_limit(const ChannelState& channel) const noexcept;
  void owe_again(std::uint32_t channel_id, std::uint32_t credits) noexcept;
  Status post_message(ChannelState& channel, std::uint64_t sequence, std::size_t length, std::uint32_t value) noexcept;
  ChannelState* owing_channel_to(int rank) noexcept;
  void return_credits_ahead_of_write(int rank) noexcept;
  // Messages of `bytes` through every slot and a send buffer would not fit this CPU's L2.
  [[nodiscard]] bool slots_outgrow_l2(const ChannelState& channel, std::size_t bytes) const noexcept {
    return (channel.shape.slots + 1) * bytes > l2_bytes_;
  }
  void send_credit_message(ChannelState& channel) noexcept;
  void take_message_credits(int source, std::uint64_t bits) noexcept;
  void land_message(int source, std::uint64_t bits, std::span<const std::byte> payload) noexcept;
  ChannelState* channel_of_message(int source, std::uint64_t bits) noexcept;

  // channel_registry.cpp
  [[nodiscard]] ChannelState* find(std::uint32_t id) noexcept {
    ChannelState* channel = find_even_closed(id);
    return channel == nullptr || channel->closed ? nullptr : channel;
  }
  // An id this registry handed out whose channel is closed since (find() gives nullptr).
  [[nodiscard]] bool closed_since(std::uint32_t id) noexcept {
    return id != 0 && id <= channels_.size() && find(id) == nullptr;
  }
  [[nodiscard]] ChannelState* find_even_closed(std::uint32_t id) noexcept {
    return id == 0 || id > channels_.size() ? nullptr : channels_[id - 1].get();
  }
  void change_waiting(ChannelState& channel, bool waiting) noexcept;
  Status refuse(ChannelState& channel, Errc code, std::string cause, std::string remedy) noexcept;
  Status fail_channel(ChannelState& channel, Errc code, std::string cause, std::string remedy) noexcept;
  // fail_channel, for a failure of this side's own doing (a write, a credit, a corrupt
  // flag line it found): the peer's side is told (kFailureSlot), since this rank stays
  // alive and the engine would never fail the peer's side.
  Status fail_channel_and_tell_peer(ChannelState& channel, Errc code, std::string cause, std::string remedy) noexcept;
  Status fail_on_transport_error(ChannelState& channel) noexcept;
  void send_notices_when_due(ChannelState& channel) noexcept;
  void owe_close_ack(ChannelState& channel) noexcept;
  void send_close_ack(ChannelState& channel) noexcept;
  void on_close_acked(int source, std::uint64_t bits) noexcept;
  void wait_for_close_ack(ChannelState& channel) noexcept;
  void send_failure_notice(ChannelState& channel) noexcept;
  void on_credit_operation(ChannelState& channel, const transport::Completion& completion) noexcept;
  void on_peer_side_failed(int source, std::uint64_t bits) noexcept;
  void send_close_notice(ChannelState& channel) noexcept;
  void on_peer_closed(int source, std::uint64_t bits) noexcept;
  void note_peer_closed(ChannelState& channel, std::uint64_t count) noexcept;
  Status fail_as_peer_closed(ChannelState& channel) noexcept;
  bool channel_write_failure_injected() noexcept;
  bool credit_failure_injected() noexcept;
  Status inject_write_failure(ChannelState& channel, std::uint64_t sequence) noexcept;
  void inject_credit_failure(ChannelState& channel) noexcept;
  [[nodiscard]] static transport::Completion injected_failure(const ChannelState& channel,
                                                             transport::CompletionKind kind, std::uint64_t context,
                                                             const char* cause) noexcept;
  void release_failure_held_for(const ChannelState& channel) noexcept;
  Status failed(ChannelState& channel) noexcept;
  void reject(const char* why, std::uint64_t notification) noexcept;

  messaging::Engine& engine_;
  // index = id - 1; ids are never reused; grows under the progress lock.
  std::vector<std::unique_ptr<ChannelState>> channels_;
  // Receive channels owing credits: waiting for a message or direct store to carry them,
  // or whose credit write met back-pressure.
  std::vector<ChannelState*> owing_credits_;
  std::vector<std::uint64_t> direct_stores_to_;  // by rank: direct stores made to it so far
  std::unique_ptr<RegistrationCache> user_cache_;  // user buffers, over the transport's registrar
  std::uint64_t progress_passes_ = 0;
  std::uint32_t credit_batch_ = 0;                 // 0: a quarter of the slots
  std::uint32_t inline_max_ = 0;                   // TETHER_CHANNEL_INLINE_MAX, within a receive buffer
  std::size_t streaming_from_ = transport::shm::streaming_copy_threshold();  // direct stores this large stream
  std::size_t l2_bytes_ = 0;                       // this CPU's L2 cache (1 MiB when unknown)
  std::size_t split_from_ = 0;                     // direct stores this large are split copies (0: none)
  std::uint64_t inject_write_failure_ = 0;         // TETHER_INJECT_CHANNEL_WRITE_FAILURE (0: none)
  enum class InjectAt : std::uint8_t { post, completion, after_close };
  InjectAt inject_at_ = InjectAt::post;            // TETHER_INJECT_WRITE_FAILURE_AT
  std::optional<transport::Completion> failure_after_close_;  // held until its channel closed
  bool write_failure_fired_ = false;
  std::uint64_t inject_credit_failure_ = 0;        // TETHER_INJECT_CREDIT_FAILURE (0: none)
  bool credit_failure_fired_ = false;
  std::uint64_t inject_corrupt_flag_ = 0;          // TETHER_INJECT_CORRUPT_FLAG (0: none)
  std::uint64_t inject_corrupt_credit_ = 0;        // TETHER_INJECT_CORRUPT_CREDIT (0: none)
  std::uint64_t remote_data_posts_ = 0;            // data writes and messages posted to peers
  std::chrono::nanoseconds connect_timeout_{};
  std::chrono::nanoseconds close_timeout_{};
  ChannelStats stats_;
};

}  // namespace tether::persist
