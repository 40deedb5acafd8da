// Channel notifications on any bytes: decode_notification, then the registry's checks
// (landing_refusal, credit_refusal) against a model of one receive and one send channel
// that applies what is accepted the way the registry does. Input: the shape, messages the
// sender started, whether landings are ordered (the sender picks slots), then 64-bit
// notifications, each also read as a direct store's slot word carrying credits
// (carried_credit_refusal). A slot is never filled twice before its release, lengths stay
// within the slot, credits never exceed what was sent, carried credits never go back.
#include <vector>

#include "persist/channel_state.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace tether::persist;
using tether::ChannelShape;

namespace {

struct Model {
  bool ordered = false;  // ordered landing: non-partitioned, slots picked by the sender
  ChannelShape shape;
  ReceiveProgress receive;
  SendProgress send;
};

Model model_from(tether::fuzz::InputReader& input) {
  Model model;
  model.shape.slots = 1 + input.take<std::uint8_t>() % 64;
  model.shape.partitions = 1 + input.take<std::uint8_t>() % 8;
  model.shape.slot_bytes = model.shape.partitions * (1 + input.take<std::uint16_t>());
  model.send.started = input.take<std::uint16_t>();
  model.ordered = model.shape.partitions == 1 && input.take<std::uint8_t>() % 2 == 1;
  std::size_t slots = model.shape.slots;
  model.receive.landing_slot.assign(slots, 0);
  model.receive.slot_held.assign(slots, 0);
  model.receive.landed_bytes.assign(slots, 0);
  model.receive.partitions_landed.assign(slots, 0);
  model.receive.partition_landed.assign(slots * model.shape.partitions, 0);
  model.receive.complete.assign(slots, 0);
  return model;
}

void land(Model& model, const Notification& notification) {
  ReceiveProgress& receive = model.receive;
  std::uint32_t slot = notification.slot;
  FUZZ_ASSERT(slot < model.shape.slots && receive.complete[slot] == 0);
  if (model.shape.partitions == 1) {
    FUZZ_ASSERT(notification.value <= model.shape.slot_bytes);
    receive.landed_bytes[slot] = notification.value;
    receive.complete[slot] = 1;
    return;
  }
  FUZZ_ASSERT(notification.value < model.shape.partitions);
  std::size_t index = static_cast<std::size_t>(slot) * model.shape.partitions + notification.value;
  FUZZ_ASSERT(receive.partition_landed.at(index) == 0);
  receive.partition_landed[index] = 1;
  if (++receive.partitions_landed[slot] == model.shape.partitions) receive.complete[slot] = 1;
}

// In arrival order, as record_ordered_landing does: a free slot, a free position.
void land_ordered(Model& model, const Notification& notification) {
  ReceiveProgress& receive = model.receive;
  auto position = static_cast<std::uint32_t>(receive.arrived % model.shape.slots);
  FUZZ_ASSERT(notification.slot < model.shape.slots && receive.slot_held[notification.slot] == 0);
  FUZZ_ASSERT(receive.complete[position] == 0 && notification.value <= model.shape.slot_bytes);
  ++receive.arrived;
  receive.landing_slot[position] = notification.slot;
  receive.slot_held[notification.slot] = 1;
  receive.complete[position] = 1;
}

// Ordered landing: the top byte's low bit releases the oldest message, as release() does.
void release_oldest(Model& model, std::uint64_t bits) {
  ReceiveProgress& receive = model.receive;
  auto position = static_cast<std::uint32_t>(receive.released % model.shape.slots);
  if ((bits >> 56 & 1) == 0 || receive.complete[position] == 0) return;
  receive.complete[position] = 0;
  receive.slot_held[receive.landing_slot[position]] = 0;
  ++receive.released;
}

// Releases the slot whose bit the notification's top byte names, as test()/release() do.
void release_some(Model& model, std::uint64_t bits) {
  std::uint32_t slot = static_cast<std::uint32_t>(bits >> 56) % model.shape.slots;
  if (model.receive.complete[slot] == 0) return;
  model.receive.complete[slot] = 0;
  model.receive.partitions_landed[slot] = 0;
  std::fill_n(model.receive.partition_landed.begin() + static_cast<std::ptrdiff_t>(slot) * model.shape.partitions,
              model.shape.partitions, 0);
}

// The bits as a direct store's slot word, the send channel's peer rank 0 and the top bit
// the writer's rank: credits it carries are taken only from that peer, within what was
// started, and never lower what the sender knew; a stale count is passed over.
void carry(Model& model, std::uint64_t bits) {
  CarriedCredits carried = carried_credits(bits);
  FUZZ_ASSERT(carried.channel_id <= kMaxChannelId && carried.released_low < kCarriedCountModulus);
  FUZZ_ASSERT(carried.channel_id == ((bits >> kCarriedIdShift) & kMaxChannelId));
  std::uint64_t released = carried_released(model.send.credit_word_seen, carried.released_low);
  // At or below what the sender knew (stale: lines read out of order), it changes nothing.
  FUZZ_ASSERT(released == model.send.credit_word_seen ||
              (released > model.send.credit_word_seen && released % kCarriedCountModulus == carried.released_low));
  int from = static_cast<int>(bits >> 63);
  FUZZ_ASSERT(carried_credit_refusal(Role::receive, 0, 0, model.send, released) != nullptr);
  if (carried_credit_refusal(Role::send, 0, from, model.send, released) != nullptr) return;
  FUZZ_ASSERT(from == 0);
  model.send.credit_word_seen = released;
  FUZZ_ASSERT(model.send.credited + model.send.credit_word_seen <= model.send.started);
}

// A close notice's count, read against a side's own count `here` (any 64 bits), keeps the
// low bits it came with and lies on the right side of `here`, at most a slot count away.
void close_notice(const Model& model, std::uint64_t here, std::uint32_t low) {
  for (Role role : {Role::send, Role::receive}) {
    auto count = peer_count_at_close(role, here, low, model.shape.slots);
    if (!count) continue;
    FUZZ_ASSERT(static_cast<std::uint32_t>(*count) == low);
    FUZZ_ASSERT(role == Role::send ? *count <= here && here - *count <= model.shape.slots
                                   : *count >= here && *count - here <= model.shape.slots);
  }
}

void apply(Model& model, std::uint64_t bits) {
  carry(model, bits);
  close_notice(model, bits, static_cast<std::uint32_t>(bits >> 7));
  close_notice(model, model.send.started, static_cast<std::uint32_t>(bits));
  Notification notification = decode_notification(bits);
  FUZZ_ASSERT(encode(notification) == (bits | (std::uint64_t{1} << 63)));
  FUZZ_ASSERT(notification.channel_id <= kMaxChannelId && notification.slot <= kCreditSlot);
  if (notification.slot == kCreditSlot) {
    FUZZ_ASSERT(credit_refusal(Role::receive, model.send, notification.value) != nullptr);
    if (credit_refusal(Role::send, model.send, notification.value) == nullptr) model.send.credited += notification.value;
    FUZZ_ASSERT(model.send.credited <= model.send.started);
    return;
  }
  if (model.ordered) {
    // The same slot and length as a direct store carried in its flag line
    if (direct_landing_refusal(model.shape, model.receive, notification.slot, notification.value,
                               LineContent::flag_line) == nullptr)
      FUZZ_ASSERT(notification.value <= kFlagInlineBytes && notification.value <= model.shape.slot_bytes &&
                  notification.slot < model.shape.slots && model.receive.slot_held[notification.slot] == 0);
    FUZZ_ASSERT(ordered_landing_refusal(Role::send, model.shape, model.receive, notification) != nullptr);
    if (ordered_landing_refusal(Role::receive, model.shape, model.receive, notification) == nullptr)
      land_ordered(model, notification);
    return release_oldest(model, bits);
  }
  FUZZ_ASSERT(landing_refusal(Role::send, model.shape, model.receive, notification) != nullptr);
  if (landing_refusal(Role::receive, model.shape, model.receive, notification) == nullptr) land(model, notification);
  release_some(model, bits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tether::fuzz::InputReader input(data, size);
  Model model = model_from(input);
  while (!input.empty()) apply(model, input.take<std::uint64_t>());
  return 0;
}
