// Operations over many channels: the handshakes in any order, start_all and wait_all.
#include <thread>
#include <vector>

#include "tether/persist.hpp"
#include "runtime/base/yield.hpp"

namespace tether {

Expected<void> wait_connected(std::span<SendChannel*> sends, std::span<ReceiveChannel*> receives) {
  // Test every handshake in turn, so no pair of ranks waits on each other's order.
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    bool all_done = true;
    for (SendChannel* channel : sends) {
      Status status = channel->test_connected();
      if (status == Status::error) return tl::unexpected(channel->last_error());
      all_done = all_done && status == Status::done;
    }
    for (ReceiveChannel* channel : receives) {
      Status status = channel->test_connected();
      if (status == Status::error) return tl::unexpected(channel->last_error());
      all_done = all_done && status == Status::done;
    }
    if (all_done) return {};
  }
}

// Channels without credit are passed over and tried again on the next round, so one
// slow receiver does not hold back the messages to every other peer.
Status start_all(std::span<SendChannel*> channels, std::span<const std::size_t> bytes) noexcept {
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
  for (std::size_t i = 0; i < channels.size(); ++i)
    if (channels[i]->wait(messages[i]) == Status::error) return Status::error;
  return Status::done;
}

}  // namespace tether
