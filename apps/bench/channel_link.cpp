// ChannelLink: the benchmark's calls mapped onto SendChannel/ReceiveChannel.
#include "apps/bench/channel_link.hpp"

#include <array>
#include <chrono>

#include <fmt/format.h>

namespace tether::bench {
namespace {

constexpr auto kStallLimit = std::chrono::seconds(30);  // start() answering retry this long is a bug
constexpr std::uint64_t kSpinsBetweenClockReads = 4096;
constexpr std::size_t kAcknowledgementBytes = 1;

bool started(Status status) { return status == Status::posted || status == Status::done; }

}  // namespace

Expected<ChannelLink> ChannelLink::connect(Runtime& runtime, const ChannelShape& outgoing,
                                           const ChannelShape& incoming) {
  auto send = SendChannel::create(runtime, outgoing);
  if (!send) return tl::unexpected(send.error());
  auto receive = ReceiveChannel::create(runtime, incoming);
  if (!receive) return tl::unexpected(receive.error());
  std::array<SendChannel*, 1> sends{&*send};
  std::array<ReceiveChannel*, 1> receives{&*receive};
  auto connected = wait_connected(sends, receives);
  if (!connected) return tl::unexpected(connected.error());
  return ChannelLink(runtime, std::move(*send), std::move(*receive));
}

bool ChannelLink::fail(const char* call, const Error& error) {
  error_ = fmt::format("{} failed: {}", call, error.message());
  return false;
}

// start() answers retry while no credit is back or the slot's buffer is still being
// written: drive progress and ask again.
bool ChannelLink::start(std::size_t bytes) {
  Status status = outgoing_.start(bytes);
  if (started(status)) return true;
  auto deadline = std::chrono::steady_clock::now() + kStallLimit;
  for (std::uint64_t spins = 1; status == Status::retry; ++spins) {
    runtime_->progress();
    status = outgoing_.start(bytes);
    if (spins % kSpinsBetweenClockReads == 0 && std::chrono::steady_clock::now() > deadline) {
      error_ = fmt::format("SendChannel::start({}) answered retry for {} s: no credit came back from rank {}", bytes,
                           kStallLimit.count(), outgoing_.shape().peer);
      return false;
    }
  }
  return started(status) || fail("SendChannel::start", outgoing_.last_error());
}

bool ChannelLink::complete_sends() {
  return outgoing_.wait() == Status::done || fail("SendChannel::wait", outgoing_.last_error());
}

bool ChannelLink::receive(std::span<const std::byte>& message) {
  return incoming_.wait(message) == Status::done || fail("ReceiveChannel::wait", incoming_.last_error());
}

bool ChannelLink::release() {
  Status status = incoming_.release();
  return started(status) || fail("ReceiveChannel::release", incoming_.last_error());
}

bool ChannelLink::send_acknowledgement() { return start(kAcknowledgementBytes) && complete_sends(); }

bool ChannelLink::receive_acknowledgement() {
  std::span<const std::byte> message;
  if (!receive(message)) return false;
  if (message.size() != kAcknowledgementBytes) {
    error_ = fmt::format("a {}-byte acknowledgement landed where {} was sent", message.size(), kAcknowledgementBytes);
    return false;
  }
  return release();
}

}  // namespace tether::bench
