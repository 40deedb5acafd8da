// Operations over many channels: the handshakes in any order, start_all and wait_all.
#include <chrono>
#include <thread>
#include <vector>

#include "persist/channel_registry.hpp"
#include "tether/persist.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/yield.hpp"

namespace tether {

namespace {

template <class Channel>
Status test_all_connected(std::span<Channel*> channels, Error& failure, const Channel*& waiting) noexcept {
  Status all = Status::done;
  for (Channel* channel : channels) {
    Status status = channel->test_connected();
    if (status == Status::error) {
      failure = channel->last_error();
      return Status::error;
    }
    if (status != Status::done && all == Status::done) {
      all = Status::posted;
      waiting = channel;
    }
  }
  return all;
}

// A list of lengths or messages that does not hold one entry per channel: nothing is
// started or taken (reading past either span would be undefined).
Status refuse_lengths(const char* call, const char* what, std::size_t channels, std::size_t entries) noexcept {
  log::error("persist", "{} over {} channels was given {} {}: give one per channel; nothing was done", call, channels,
             entries, what);
  return Status::error;
}

}  // namespace

Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives) {
  if (sends.empty() && receives.empty()) return {};
  const persist::ChannelRegistry& registry =
      sends.empty() ? *receives.front()->registry_ : *sends.front()->registry_;
  const auto timeout = registry.connect_timeout();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Test every handshake in turn, so no pair of ranks waits on each other's order.
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    Error failure;
    const SendChannel* send_waiting = nullptr;
    const ReceiveChannel* receive_waiting = nullptr;
    Status sends_status = test_all_connected(sends, failure, send_waiting);
    if (sends_status == Status::error) return tl::unexpected(failure);
    Status receives_status = test_all_connected(receives, failure, receive_waiting);
    if (receives_status == Status::error) return tl::unexpected(failure);
    if (sends_status == Status::done && receives_status == Status::done) return {};
    if (timeout.count() > 0 && std::chrono::steady_clock::now() > deadline) {
      for (SendChannel* channel : sends) channel->state_->connect_timed_out = true;  // (connected ones ignore it)
      for (ReceiveChannel* channel : receives) channel->state_->connect_timed_out = true;
      return tl::unexpected(persist::ChannelRegistry::connect_timeout_error(
          send_waiting != nullptr ? *send_waiting->state_ : *receive_waiting->state_));
    }
  }
}

// Channels without credit are passed over and tried again on the next round, so one
// slow receiver does not hold back the messages to every other peer.
Status start_all(std::span<SendChannel*> channels, std::span<const std::size_t> bytes) noexcept {
  if (bytes.size() != channels.size()) return refuse_lengths("start_all", "bytes", channels.size(), bytes.size());
  thread_local std::vector<std::uint8_t> started;
  started.assign(channels.size(), 0);
  std::size_t left = channels.size();
  for (base::YieldCountdown countdown; left > 0;) {
    for (std::size_t i = 0; i < channels.size(); ++i) {
      if (started[i] != 0) continue;
      Status status = channels[i]->start(bytes[i]);
      if (status == Status::error) return status;
      if (status == Status::retry) continue;
      started[i] = 1;
      --left;
    }
    if (left > 0) countdown.after_poll();
  }
  return Status::posted;
}

Status wait_all(std::span<SendChannel*> channels) noexcept {
  for (SendChannel* channel : channels)
    if (channel->wait() == Status::error) return Status::error;
  return Status::done;
}

Status wait_all(std::span<ReceiveChannel*> channels, std::span<std::span<const std::byte>> messages) noexcept {
  if (messages.size() != channels.size())
    return refuse_lengths("wait_all", "messages", channels.size(), messages.size());
  for (std::size_t i = 0; i < channels.size(); ++i)
    if (channels[i]->wait(messages[i]) == Status::error) return Status::error;
  return Status::done;
}

}  // namespace tether
