// SendChannel and ReceiveChannel: thin handles over the registry's channel state.
#include "persist/channel_registry.hpp"
#include "runtime/base/yield.hpp"

namespace tether {
namespace {

// `test` until it says anything but `pending`, giving the CPU away as every wait does.
template <class Test>
Status wait_while(Status pending, Test&& test) noexcept {
  for (base::YieldCountdown countdown;; countdown.after_poll()) {
    Status status = test();
    if (status != pending) return status;
  }
}

}  // namespace

// --- SendChannel ---

Expected<SendChannel> SendChannel::create(Runtime& runtime, const ChannelShape& shape) {
  return create(runtime, shape, {});
}

Expected<SendChannel> SendChannel::create(Runtime& runtime, const ChannelShape& shape, std::span<std::byte> user_buffer) {
  auto& registry = persist::ChannelRegistry::of(runtime);
  auto state = registry.create(persist::Role::send, shape, user_buffer);
  if (!state) return tl::unexpected(state.error());
  return SendChannel(&registry, *state);
}

SendChannel::SendChannel(SendChannel&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), state_(std::exchange(other.state_, nullptr)) {}

SendChannel& SendChannel::operator=(SendChannel&& other) noexcept {
  if (this == &other) return *this;
  if (state_ != nullptr) registry_->close(*state_);
  registry_ = std::exchange(other.registry_, nullptr);
  state_ = std::exchange(other.state_, nullptr);
  return *this;
}

SendChannel::~SendChannel() {
  if (state_ != nullptr) registry_->close(*state_);
}

Status SendChannel::test_connected() noexcept { return registry_->test_connected(*state_); }
Expected<void> SendChannel::wait_connected() { return registry_->wait_connected(*state_); }

std::span<std::byte> SendChannel::buffer() const noexcept {
  return registry_->next_buffer_span(*state_);
}

Status SendChannel::next_buffer(std::span<std::byte>& buffer) noexcept { return registry_->next_buffer(*state_, buffer); }
Status SendChannel::wait_buffer(std::span<std::byte>& buffer) noexcept {
  return wait_while(Status::retry, [&] { return registry_->next_buffer(*state_, buffer); });
}
Status SendChannel::start(std::size_t bytes) noexcept { return registry_->start(*state_, bytes); }
Status SendChannel::ready(std::uint32_t index) noexcept { return registry_->ready(*state_, index); }
Status SendChannel::test() noexcept { return registry_->test_sent(*state_); }
Status SendChannel::wait() noexcept {
  return wait_while(Status::posted, [this] { return registry_->test_sent(*state_); });
}
const ChannelShape& SendChannel::shape() const noexcept { return state_->shape; }
const Error& SendChannel::last_error() const noexcept { return state_->last_error; }

// --- ReceiveChannel ---

Expected<ReceiveChannel> ReceiveChannel::create(Runtime& runtime, const ChannelShape& shape) {
  return create(runtime, shape, {});
}

Expected<ReceiveChannel> ReceiveChannel::create(Runtime& runtime, const ChannelShape& shape,
                                                std::span<std::byte> user_slots) {
  auto& registry = persist::ChannelRegistry::of(runtime);
  auto state = registry.create(persist::Role::receive, shape, user_slots);
  if (!state) return tl::unexpected(state.error());
  return ReceiveChannel(&registry, *state);
}

ReceiveChannel::ReceiveChannel(ReceiveChannel&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), state_(std::exchange(other.state_, nullptr)) {}

ReceiveChannel& ReceiveChannel::operator=(ReceiveChannel&& other) noexcept {
  if (this == &other) return *this;
  if (state_ != nullptr) registry_->close(*state_);
  registry_ = std::exchange(other.registry_, nullptr);
  state_ = std::exchange(other.state_, nullptr);
  return *this;
}

ReceiveChannel::~ReceiveChannel() {
  if (state_ != nullptr) registry_->close(*state_);
}

Status ReceiveChannel::test_connected() noexcept { return registry_->test_connected(*state_); }
Expected<void> ReceiveChannel::wait_connected() { return registry_->wait_connected(*state_); }
Status ReceiveChannel::test(std::span<const std::byte>& message) noexcept {
  return registry_->test_received(*state_, message);
}
Status ReceiveChannel::wait(std::span<const std::byte>& message) noexcept {
  return registry_->wait_received(*state_, message);
}
bool ReceiveChannel::arrived(std::uint32_t index) noexcept { return registry_->arrived(*state_, index); }
Status ReceiveChannel::release() noexcept { return registry_->release(*state_); }
const ChannelShape& ReceiveChannel::shape() const noexcept { return state_->shape; }
const Error& ReceiveChannel::last_error() const noexcept { return state_->last_error; }

}  // namespace tether
