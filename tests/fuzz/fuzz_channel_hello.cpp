// persist::check_hello on any bytes. Input: this side's role and shape (tag, slots,
// slot bytes, partitions), its landing order, then the 136-byte hello. An accepted hello
// must match the shape and the landing order and offer at least what the peer will write.
#include <cstring>

#include "persist/channel_state.hpp"
#include "tests/fuzz/fuzz_input.hpp"

using namespace tether::persist;
using tether::ChannelShape;

namespace {

ChannelShape shape_from(tether::fuzz::InputReader& input) {
  ChannelShape shape;
  shape.peer = 1;
  shape.tag = input.take<std::int32_t>() & tether::kMaxChannelTag;
  shape.slots = 1 + input.take<std::uint16_t>() % tether::kMaxChannelSlots;
  shape.slot_bytes = input.take<std::uint32_t>();
  shape.partitions = 1 + input.take<std::uint8_t>() % 16;
  return shape;
}

void check_accepted(const ChannelHello& in, Role own_role, const ChannelShape& shape, LandingOrder own_order) {
  Role peer_role = own_role == Role::send ? Role::receive : Role::send;
  FUZZ_ASSERT(in.magic == kHelloMagic && in.version == kHelloVersion && in.role == peer_role);
  FUZZ_ASSERT(in.tag == shape.tag && in.channel_id != 0 && in.channel_id <= kMaxChannelId);
  FUZZ_ASSERT(in.slots == shape.slots && in.slot_bytes == shape.slot_bytes && in.partitions == shape.partitions);
  std::uint64_t needed = peer_role == Role::receive ? shape.slot_bytes * shape.slots : sizeof(std::uint64_t);
  FUZZ_ASSERT(in.landing.length >= needed);
  FUZZ_ASSERT(in.landing_order == own_order);  // and so a known one
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tether::fuzz::InputReader input(data, size);
  Role own_role = (input.take<std::uint8_t>() & 1) != 0 ? Role::receive : Role::send;
  ChannelShape shape = shape_from(input);
  LandingOrder own_order = (input.take<std::uint8_t>() & 1) != 0 ? LandingOrder::by_arrival : LandingOrder::by_position;
  ChannelHello in{};
  auto rest = input.rest();
  std::memcpy(&in, rest.data(), std::min(rest.size(), sizeof in));
  auto accepted = check_hello(in, own_role, shape, own_order);
  if (accepted) check_accepted(in, own_role, shape, own_order);
  else FUZZ_ASSERT(accepted.error().code == tether::Errc::invalid_argument && !accepted.error().cause.empty());
  return 0;
}
