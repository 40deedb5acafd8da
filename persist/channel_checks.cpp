// What a peer sends, checked before it is believed: its hello, and the notifications of
// its writes and credits. Pure functions of the channel's state, so tests/fuzz drives
// them with any bytes.
#include <fmt/format.h>

#include "persist/channel_state.hpp"

namespace tether::persist {

const char* side(Role role) noexcept { return role == Role::send ? "sender" : "receiver"; }

std::string shape_text(std::uint64_t slot_bytes, std::uint32_t slots, std::uint32_t partitions) {
  return fmt::format("slot_bytes {}, slots {}, partitions {}", slot_bytes, slots, partitions);
}

namespace {

const char* order_text(LandingOrder order) noexcept {
  return order == LandingOrder::by_arrival ? "in arrival order" : "by position";
}

bool well_formed(const ChannelHello& in, Role expected, int tag) noexcept {
  return in.magic == kHelloMagic && in.version == kHelloVersion && in.role == expected && in.tag == tag &&
         in.channel_id != 0 && in.channel_id <= kMaxChannelId && in.landing_order <= LandingOrder::by_arrival;
}

}  // namespace

Expected<void> check_hello(const ChannelHello& in, Role own_role, const ChannelShape& shape,
                           LandingOrder own_order) {
  Role expected = own_role == Role::send ? Role::receive : Role::send;
  if (!well_formed(in, expected, shape.tag))
    return make_error(Errc::invalid_argument,
                      "the peer's hello is malformed (magic, version, role, tag, id or landing order)",
                      "run the same tether version on every rank");
  if (in.slot_bytes != shape.slot_bytes || in.slots != shape.slots || in.partitions != shape.partitions)
    return make_error(Errc::invalid_argument,
                      fmt::format("this {} has {}; the {} on rank {} has {}", side(own_role),
                                  shape_text(shape.slot_bytes, shape.slots, shape.partitions), side(expected),
                                  shape.peer, shape_text(in.slot_bytes, in.slots, in.partitions)),
                      "create both sides with the same slot_bytes, slots and partitions");
  std::uint64_t needed = expected == Role::receive ? shape.slot_bytes * shape.slots : sizeof(std::uint64_t);
  if (in.landing.length < needed)
    return make_error(Errc::invalid_argument,
                      fmt::format("the peer offers {} bytes to write where {} are needed", in.landing.length, needed),
                      "run the same tether version on every rank");
  if (in.landing_order != own_order)
    return make_error(Errc::invalid_argument,
                      fmt::format("this {} lands messages {}; the {} on rank {} lands them {}", side(own_role),
                                  order_text(own_order), side(expected), shape.peer, order_text(in.landing_order)),
                      "run the same tether version with the same TETHER_SHM, TETHER_SHM_TRANSPORT and "
                      "TETHER_NET_TRANSPORT on every rank");
  return {};
}

const char* landing_refusal(Role role, const ChannelShape& shape, const ReceiveProgress& receive,
                            const Notification& notification) noexcept {
  if (role != Role::receive) return "data for a send channel";
  if (notification.slot >= shape.slots) return "slot beyond the channel's slots";
  if (receive.complete[notification.slot] != 0) return "the slot still holds a message not released (a sender without credit)";
  if (shape.partitions == 1) return notification.value > shape.slot_bytes ? "length beyond the slot" : nullptr;
  if (notification.value >= shape.partitions) return "partition beyond the channel's partitions";
  std::size_t index = static_cast<std::size_t>(notification.slot) * shape.partitions + notification.value;
  return receive.partition_landed[index] != 0 ? "a partition landed twice" : nullptr;
}

const char* ordered_landing_refusal(Role role, const ChannelShape& shape, const ReceiveProgress& receive,
                                    const Notification& notification) noexcept {
  if (role != Role::receive) return "data for a send channel";
  if (receive.complete[receive.arrived % shape.slots] != 0) return "more messages than slots (a sender without credit)";
  return direct_landing_refusal(shape, receive, notification.slot, notification.value);
}

const char* credit_refusal(Role role, const SendProgress& send, std::uint32_t credits) noexcept {
  if (role != Role::send) return "a credit for a receive channel";
  if (credits == 0 || credits > send.started - send.credited) return "more credits than messages in flight";
  return nullptr;
}

}  // namespace tether::persist
