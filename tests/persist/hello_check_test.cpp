// persist::check_hello, the pure check of the peer's handshake: a hello that agrees is
// accepted; one that disagrees on shape or landing order is refused naming both sides.
// Also direct_landing_refusal for a message carried in its flag line or split, the
// shares of a split copy, and which send buffer the next message is produced in.
#include <vector>

#include <gtest/gtest.h>

#include "persist/channel_state.hpp"

namespace tether::persist {
namespace {

ChannelShape four_slots_of_4k() {
  ChannelShape shape;
  shape.peer = 1;
  shape.tag = 7;
  shape.slots = 4;
  shape.slot_bytes = 4096;
  return shape;
}

ChannelHello receiver_hello(const ChannelShape& shape, LandingOrder order) {
  ChannelHello hello;
  hello.role = Role::receive;
  hello.channel_id = 3;
  hello.tag = shape.tag;
  hello.slots = shape.slots;
  hello.slot_bytes = shape.slot_bytes;
  hello.partitions = shape.partitions;
  hello.landing.length = shape.slots * shape.slot_bytes;
  hello.landing_order = order;
  return hello;
}

TEST(ChannelHelloCheck, AcceptsAHelloThatAgrees) {
  ChannelShape shape = four_slots_of_4k();
  for (LandingOrder order : {LandingOrder::by_position, LandingOrder::by_arrival})
    EXPECT_TRUE(check_hello(receiver_hello(shape, order), Role::send, shape, order));
}

TEST(ChannelHelloCheck, RefusesADifferentLandingOrderNamingBothSides) {
  ChannelShape shape = four_slots_of_4k();
  auto checked = check_hello(receiver_hello(shape, LandingOrder::by_position), Role::send, shape,
                             LandingOrder::by_arrival);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error().code, Errc::invalid_argument);
  EXPECT_NE(checked.error().cause.find("this sender lands messages in arrival order"), std::string::npos)
      << checked.error().cause;
  EXPECT_NE(checked.error().cause.find("the receiver on rank 1 lands them by position"), std::string::npos)
      << checked.error().cause;
  EXPECT_NE(checked.error().remedy.find("TETHER_SHM_TRANSPORT"), std::string::npos) << checked.error().remedy;
}

TEST(ChannelHelloCheck, RefusesADifferentShapeNamingBothValues) {
  ChannelShape shape = four_slots_of_4k();
  ChannelHello hello = receiver_hello(shape, LandingOrder::by_position);
  hello.slots = 8;
  hello.landing.length = 8 * shape.slot_bytes;
  auto checked = check_hello(hello, Role::send, shape, LandingOrder::by_position);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().cause.find("slots 4"), std::string::npos) << checked.error().cause;
  EXPECT_NE(checked.error().cause.find("slots 8"), std::string::npos) << checked.error().cause;
}

TEST(ChannelHelloCheck, RefusesAnUnknownLandingOrder) {
  ChannelShape shape = four_slots_of_4k();
  ChannelHello hello = receiver_hello(shape, LandingOrder::by_position);
  hello.landing_order = static_cast<LandingOrder>(2);
  auto checked = check_hello(hello, Role::send, shape, LandingOrder::by_position);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().cause.find("malformed"), std::string::npos) << checked.error().cause;
}

TEST(ChannelHelloCheck, RefusesAnOlderVersion) {
  ChannelShape shape = four_slots_of_4k();
  ChannelHello hello = receiver_hello(shape, LandingOrder::by_position);
  hello.version = kHelloVersion - 1;
  auto checked = check_hello(hello, Role::send, shape, LandingOrder::by_position);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().remedy.find("same tether version"), std::string::npos);
}

// A direct store's flag line: a message in the line may not claim more than the line
// holds, whatever the slot would take; one in the slot may fill the slot.
TEST(DirectLandingCheck, RefusesAFlagLineMessageLongerThanTheLine) {
  ChannelShape shape = four_slots_of_4k();
  ReceiveProgress receive;
  receive.slot_held.assign(shape.slots, 0);
  constexpr LineContent kInLine = LineContent::flag_line;
  EXPECT_EQ(direct_landing_refusal(shape, receive, 2, kFlagInlineBytes, kInLine), nullptr);
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 2, kFlagInlineBytes + 1, kInLine), "length beyond the flag line");
  EXPECT_EQ(direct_landing_refusal(shape, receive, 2, 4096), nullptr);
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 2, 4097), "length beyond the slot");
  receive.slot_held[2] = 1;
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 2, 8, kInLine), "the slot still holds a message not released");
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 4, 8, kInLine), "slot beyond the channel's slots");
}

// A split copy (kSlotSplit) is for messages of more than one piece, never in the flag line.
TEST(DirectLandingCheck, RefusesASplitCopyOfAMessageTooSmallToSplit) {
  ChannelShape shape{.peer = 1, .tag = 3, .slot_bytes = std::size_t{1} << 20, .slots = 2};
  ReceiveProgress receive;
  receive.slot_held.assign(shape.slots, 0);
  const char* too_small = "a split copy of a message too small to split";
  constexpr LineContent kSplit = LineContent::split;
  EXPECT_EQ(direct_landing_refusal(shape, receive, 1, kSplitPieceBytes + 1, kSplit), nullptr);
  EXPECT_EQ(direct_landing_refusal(shape, receive, 1, 1U << 20, kSplit), nullptr);
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 1, kSplitPieceBytes, kSplit), too_small);
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 1, 8, kSplit), too_small);
  EXPECT_STREQ(direct_landing_refusal(shape, receive, 1, (1U << 20) + 1, kSplit), "length beyond the slot");
  EXPECT_EQ(split_pieces(kSplitPieceBytes + 1), 2U);
  EXPECT_EQ(split_pieces(std::size_t{1} << 20), 16U);
}

// Both sides' shares of one split copy cover every byte once, a short last piece
// included, and a share never takes more pieces than the message has.
TEST(SplitCopyShare, TwoSharesCopyEveryPieceOnce) {
  alignas(64) std::byte line[kFlagStride] = {};
  const std::size_t length = 3 * kSplitPieceBytes + 100;
  std::vector<int> copies(split_pieces(length), 0);
  std::size_t bytes_copied = 0;
  auto count = [&](std::size_t offset, std::size_t bytes) {
    ++copies[offset / kSplitPieceBytes];
    bytes_copied += bytes;
  };
  std::uint64_t others = 0;
  std::uint64_t first = copy_split_share(line, 0, length, [&](std::size_t offset, std::size_t bytes) {
    count(offset, bytes);
    if (offset == 0) others = copy_split_share(line, 0, length, count);  // the other side takes the rest
  });
  EXPECT_EQ(others, 3U);
  EXPECT_EQ(first, 1U);
  EXPECT_EQ(copies, std::vector<int>(4, 1));
  EXPECT_EQ(bytes_copied, length);
  EXPECT_EQ(*split_pieces_copied_at(line, 0), 4U);
  // A peer winding word 2 back after every piece: one share still stops after as many pieces as there are.
  *split_pieces_taken_at(line, 0) = 0;
  EXPECT_EQ(copy_split_share(line, 0, length, [&](std::size_t, std::size_t) { *split_pieces_taken_at(line, 0) = 0; }),
            4U);
}

// Writes are answered in order, but the last buffer is taken again while free: then the one
// in turn can be busy while another is free, and the next message must not wait for it.
TEST(SendBufferChoice, TakesAFreeBufferWhenTheOneInTurnIsBusy) {
  SendProgress send;
  send.buffer_writes = {1, 0, 1};
  send.last_buffer = 2;  // busy too
  EXPECT_EQ(send.pick_buffer(0, 3), 1U);
  EXPECT_EQ(send.picked_buffer, 1U);
}

TEST(SendBufferChoice, PrefersThePickedThenTheLastBufferAndTheOneInTurnWhenAllAreBusy) {
  SendProgress send;
  send.buffer_writes = {0, 0, 0};
  send.last_buffer = 2;
  EXPECT_EQ(send.pick_buffer(0, 3), 2U);  // still in cache
  send.last_buffer = 0;
  EXPECT_EQ(send.pick_buffer(1, 3), 2U);  // kept until start() takes it
  send.buffer_writes = {1, 1, 1};
  EXPECT_EQ(send.pick_buffer(1, 3), 1U);
}

}  // namespace
}  // namespace tether::persist
