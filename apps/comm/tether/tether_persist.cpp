// --comm persist: one tether persistent channel per message of the pattern, created and
// connected once in create_exchange(). The shared loop packs straight into each send
// channel's pinned buffer and unpacks from where each message landed: no copy besides them.
//
// Per iteration, start(): release the messages the previous iteration landed, start every
// send; wait(): wait for every receive and for each send channel's next buffer to be free
// (not for every write to finish: over tcp a write finishes when the receiver's poll
// answers it, and a receiver polls only once it computed its interior). A landed message
// stays put until the next start(), after the loop unpacked it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/comm/tether/tether_backend.hpp"
#include "apps/comm/tether/tether_process_group.hpp"
#include "runtime/base/log.hpp"
#include "tether/persist.hpp"

namespace tether::apps {
namespace {

// Three landing slots (and, where writes are answered, three send buffers) per channel. A
// receiver holds a message until its next start(); with two slots its credit then came
// only at the release after (credits by message go two at a time where the receiver did
// not wait), so each rank started an iteration only once its neighbours had started it:
// over tcp at n=8000 on 4 ranks that lockstep made `persist` 5% slower than `mpi`.
constexpr std::uint32_t kSlotsPerChannel = 3;

std::size_t payload_bytes(const HaloMessage& message) { return message.doubles * sizeof(double); }

// An empty message (none of today's patterns has one) still travels, in a one-double slot.
ChannelShape shape_of(const HaloMessage& message) {
  return ChannelShape{.peer = message.peer,
                      .tag = message.tag,
                      .slot_bytes = std::max(payload_bytes(message), sizeof(double)),
                      .slots = kSlotsPerChannel};
}

std::string describe(const char* direction, const HaloMessage& message) {
  return fmt::format("{} channel with rank {} (tag {}, {} doubles)", direction, message.peer, message.tag,
                     message.doubles);
}

Error with_context(Error error, const std::string& context) {
  error.cause = fmt::format("{}: {}", context, error.cause);
  return error;
}

bool is_double_aligned(const std::byte* address) {
  return reinterpret_cast<std::uintptr_t>(address) % alignof(double) == 0;
}

// The collective channel calls stop at the first failure: name every channel holding one.
template <class Channel>
void log_failed_channels(const char* call, const char* direction, std::span<const Channel> channels,
                         const std::vector<HaloMessage>& messages) noexcept {
  bool named = false;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const Error& error = channels[i].last_error();
    if (error.code == Errc::ok) continue;
    log::error("apps", "{} failed on the {}: {}", call, describe(direction, messages[i]), error.message());
    named = true;
  }
  if (!named) log::error("apps", "{} failed, yet no {} channel reports an error", call, direction);
}

class PersistentChannelExchange final : public HaloExchange {
 public:
  static Expected<std::unique_ptr<HaloExchange>> create(Runtime& runtime, const HaloPattern& pattern);
  // The last iteration's messages go back too, and the last writes finish, so no channel
  // closes holding one.
  ~PersistentChannelExchange() override {
    (void)release_landed();
    if (!failed_ && wait_all(send_pointers_) != Status::done) (void)fail_sends("wait_all (sends, closing)");
  }

  std::span<double> send_buffer(std::size_t index) noexcept override {
    std::span<std::byte> buffer = sends_[index].buffer();
    return {reinterpret_cast<double*>(buffer.data()), pattern_.sends[index].doubles};
  }
  std::span<const double> receive_buffer(std::size_t index) noexcept override {
    std::span<const std::byte> message = landed_[index];
    return {reinterpret_cast<const double*>(message.data()), message.size() / sizeof(double)};
  }

  Status start() noexcept override {
    if (release_landed() != Status::done) return Status::error;
    return start_all(send_pointers_, send_bytes_) == Status::error ? fail_sends("start_all") : Status::done;
  }

  Status wait() noexcept override {
    if (wait_all(receive_pointers_, landed_) != Status::done) return fail_receives("wait_all (receives)");
    holding_landed_ = true;
    if (!landed_as_expected()) {
      failed_ = true;
      return Status::error;
    }
    return wait_for_send_buffers();
  }

 private:
  explicit PersistentChannelExchange(const HaloPattern& pattern) : pattern_(pattern) {}

  Expected<void> create_channels(Runtime& runtime);
  Expected<void> connect();
  Status release_landed() noexcept;
  Status wait_for_send_buffers() noexcept;
  bool landed_as_expected() noexcept;
  Status fail_sends(const char* call) noexcept;
  Status fail_receives(const char* call) noexcept;

  HaloPattern pattern_;
  std::vector<SendChannel> sends_;
  std::vector<ReceiveChannel> receives_;
  std::vector<SendChannel*> send_pointers_;
  std::vector<ReceiveChannel*> receive_pointers_;
  std::vector<std::size_t> send_bytes_;
  std::vector<std::span<const std::byte>> landed_;  // receive i's message until released
  bool holding_landed_ = false;
  bool failed_ = false;  // a call failed: closing waits for no write
};

Expected<std::unique_ptr<HaloExchange>> PersistentChannelExchange::create(Runtime& runtime,
                                                                          const HaloPattern& pattern) {
  std::unique_ptr<PersistentChannelExchange> exchange(new PersistentChannelExchange(pattern));
  if (auto created = exchange->create_channels(runtime); !created) return tl::unexpected(created.error());
  if (auto connected = exchange->connect(); !connected) return tl::unexpected(connected.error());
  return exchange;
}

Expected<void> PersistentChannelExchange::create_channels(Runtime& runtime) {
  sends_.reserve(pattern_.sends.size());
  for (const HaloMessage& message : pattern_.sends) {
    auto channel = SendChannel::create(runtime, shape_of(message));
    if (!channel) return tl::unexpected(with_context(channel.error(), "creating the " + describe("send", message)));
    sends_.push_back(std::move(*channel));
    send_bytes_.push_back(payload_bytes(message));
  }
  receives_.reserve(pattern_.receives.size());
  for (const HaloMessage& message : pattern_.receives) {
    auto channel = ReceiveChannel::create(runtime, shape_of(message));
    if (!channel)
      return tl::unexpected(with_context(channel.error(), "creating the " + describe("receive", message)));
    receives_.push_back(std::move(*channel));
  }
  for (SendChannel& channel : sends_) send_pointers_.push_back(&channel);
  for (ReceiveChannel& channel : receives_) receive_pointers_.push_back(&channel);
  landed_.resize(receives_.size());
  return {};
}

Expected<void> PersistentChannelExchange::connect() {
  auto connected = wait_connected(send_pointers_, receive_pointers_);
  if (!connected) return tl::unexpected(with_context(connected.error(), "connecting the halo channels"));
  for (std::size_t i = 0; i < sends_.size(); ++i) {
    if (!is_double_aligned(sends_[i].buffer().data()))
      return make_error(Errc::unsupported,
                        fmt::format("the {} buffer is not aligned for doubles", describe("send", pattern_.sends[i])),
                        "report this: tether's pinned pool hands out aligned buffers");
  }
  return {};
}

// Hands every slot the loop has finished unpacking back to its sender.
Status PersistentChannelExchange::release_landed() noexcept {
  if (!holding_landed_) return Status::done;
  for (std::size_t i = 0; i < receives_.size(); ++i) {
    if (receives_[i].release() == Status::error) {
      log::error("apps", "release on the {} failed: {}", describe("receive", pattern_.receives[i]),
                 receives_[i].last_error().message());
      failed_ = true;
      return Status::error;
    }
    landed_[i] = {};
  }
  holding_landed_ = false;
  return Status::done;
}

// The buffers the next iteration packs into (send_buffer() gives the ones found here).
Status PersistentChannelExchange::wait_for_send_buffers() noexcept {
  for (SendChannel& channel : sends_) {
    std::span<std::byte> buffer;
    if (channel.wait_buffer(buffer) != Status::done) return fail_sends("wait_buffer");
  }
  return Status::done;
}

// Every message must be exactly as long as its receive (the pattern pairs equal lengths).
bool PersistentChannelExchange::landed_as_expected() noexcept {
  for (std::size_t i = 0; i < landed_.size(); ++i) {
    const HaloMessage& message = pattern_.receives[i];
    if (landed_[i].size() != payload_bytes(message)) {
      log::error("apps", "the {} landed {} bytes, expected {}", describe("receive", message), landed_[i].size(),
                 payload_bytes(message));
      return false;
    }
    if (!is_double_aligned(landed_[i].data())) {
      log::error("apps", "the {} landed a message at {} that is not aligned for doubles", describe("receive", message),
                 fmt::ptr(landed_[i].data()));
      return false;
    }
  }
  return true;
}

Status PersistentChannelExchange::fail_sends(const char* call) noexcept {
  failed_ = true;
  log_failed_channels(call, "send", std::span<const SendChannel>(sends_), pattern_.sends);
  return Status::error;
}

Status PersistentChannelExchange::fail_receives(const char* call) noexcept {
  failed_ = true;
  log_failed_channels(call, "receive", std::span<const ReceiveChannel>(receives_), pattern_.receives);
  return Status::error;
}

class TetherPersistBackend final : public TetherProcessGroup {
 public:
  using TetherProcessGroup::TetherProcessGroup;
  Expected<std::unique_ptr<HaloExchange>> create_exchange(const HaloPattern& pattern) override {
    return PersistentChannelExchange::create(runtime(), pattern);
  }
};

}  // namespace

Expected<std::unique_ptr<CommBackend>> start_tether_persist_backend(int&, char**&) {
  return start_tether_process_group<TetherPersistBackend>();
}

}  // namespace tether::apps
