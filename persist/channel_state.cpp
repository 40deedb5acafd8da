// Bit layouts of channel notifications, operation contexts and handshake tags.
#include "persist/channel_state.hpp"

#include "runtime/messaging/engine.hpp"

namespace tether::persist {

std::uint64_t encode(const Notification& notification) noexcept {
  return messaging::kChannelNotificationBit | (std::uint64_t{notification.channel_id & kMaxChannelId} << 44) |
         (std::uint64_t{notification.slot & 0xfffU} << 32) | notification.value;
}

Notification decode_notification(std::uint64_t bits) noexcept {
  return {static_cast<std::uint32_t>(bits >> 44) & kMaxChannelId, static_cast<std::uint32_t>(bits >> 32) & 0xfffU,
          static_cast<std::uint32_t>(bits)};
}

std::uint64_t operation_context(std::uint32_t channel_id, bool credit, std::uint32_t buffer) noexcept {
  std::uint64_t value = (std::uint64_t{channel_id} << 13) | (std::uint64_t{credit} << 12) | (buffer & 0xfffU);
  return messaging::make_context(messaging::ContextKind::channel, value);
}

OperationContext decode_context(std::uint64_t context) noexcept {
  std::uint64_t value = messaging::context_value(context);
  return {static_cast<std::uint32_t>(value >> 13), ((value >> 12) & 1U) != 0, static_cast<std::uint32_t>(value & 0xfffU)};
}

int hello_tag(int channel_tag, Role role) noexcept {
  return -(16 + 2 * channel_tag + (role == Role::send ? 0 : 1));
}

}  // namespace tether::persist
