// Operations over many channels: the handshakes in any order, start_all and wait_all.
#include <vector>

#include "persist/channel_registry.hpp"
#include "tether/persist.hpp"
#include "runtime/base/log.hpp"
#include "runtime/base/yield.hpp"

namespace tether {

namespace {

template <class Channel>
Status test_all_connected(std::span<Channel*> channels, Error& failure) noexcept {
  Status all = Status::done;
  for (Channel* channel : channels) {
    Status status = channel->test_connected();
    if (status == Status::error) {
      failure = channel->last_error();
      return Status::error;
    }
    if (status != Status::done) all = Status::posted;
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

// Every handshake is tested in turn, so no pair of ranks waits on each other's order; each
// gets the timeout from this call, and the first past it ends the wait with its error.
Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives) {
  for (SendChannel* channel : sends) channel->registry_->restart_connect_deadline(*channel->state_);
  for (ReceiveChannel* channel : receives) channel->registry_->restart_connect_deadline(*channel->state_);
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    Error failure;
    Status sends_status = test_all_connected(sends, failure);
    if (sends_status == Status::error) return tl::unexpected(failure);
    Status receives_status = test_all_connected(receives, failure);
    if (receives_status == Status::error) return tl::unexpected(failure);
    if (sends_status == Status::done && receives_status == Status::done) return {};
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
