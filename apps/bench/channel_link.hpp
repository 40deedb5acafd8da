// A PersistentLink over tether's persistent channels: one SendChannel to the peer and one
// ReceiveChannel from it, created and connected once, reused for every size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tether/persist.hpp"
#include "tether/runtime.hpp"

namespace tether::bench {

class ChannelLink {
 public:
  // Creates both channels (`outgoing` to, `incoming` from shape.peer) and waits for their
  // handshakes. The peer creates the mirror image.
  static Expected<ChannelLink> connect(Runtime& runtime, const ChannelShape& outgoing, const ChannelShape& incoming);

  [[nodiscard]] int rank() const { return runtime_->rank(); }
  [[nodiscard]] bool prepare(std::size_t /*bytes*/) { return true; }
  [[nodiscard]] std::span<std::byte> send_buffer() { return outgoing_.buffer(); }
  [[nodiscard]] bool expect(int /*count*/) { return true; }  // landing slots are always there
  [[nodiscard]] bool start(std::size_t bytes);
  [[nodiscard]] bool complete_sends();
  [[nodiscard]] bool receive(std::span<const std::byte>& message);
  [[nodiscard]] bool release();
  [[nodiscard]] bool send_acknowledgement();
  [[nodiscard]] bool receive_acknowledgement();
  [[nodiscard]] std::string error() const { return error_; }

 private:
  ChannelLink(Runtime& runtime, SendChannel outgoing, ReceiveChannel incoming)
      : runtime_(&runtime), outgoing_(std::move(outgoing)), incoming_(std::move(incoming)) {}
  bool fail(const char* call, const Error& error);

  Runtime* runtime_;
  SendChannel outgoing_;
  ReceiveChannel incoming_;
  std::string error_;
};

}  // namespace tether::bench
