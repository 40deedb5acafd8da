#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/messaging/wire.hpp"

namespace tether::messaging {
namespace {

template <class Body>
std::vector<std::byte> encode(MessageHeader header, const Body& body) {
  std::vector<std::byte> bytes(sizeof header + sizeof body);
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + sizeof header, &body, sizeof body);
  return bytes;
}

std::vector<std::byte> eager(std::size_t payload, int source = 1) {
  MessageHeader header = make_header(MessageKind::eager, source, 5, 0, payload);
  std::vector<std::byte> bytes(sizeof header + payload, std::byte{7});
  std::memcpy(bytes.data(), &header, sizeof header);
  return bytes;
}

TEST(WireTest, EagerRoundTrip) {
  auto bytes = eager(100);
  auto message = decode(bytes, 4);
  ASSERT_TRUE(message) << message.error().message();
  EXPECT_EQ(message->header.tag, 5);
  EXPECT_EQ(message->payload.size(), 100u);
  EXPECT_EQ(message->payload[99], std::byte{7});
}

TEST(WireTest, RejectsShortTruncatedAndPaddedMessages) {
  auto bytes = eager(100);
  EXPECT_FALSE(decode(std::span(bytes).first(10), 4));
  EXPECT_FALSE(decode(std::span(bytes).first(bytes.size() - 1), 4));
  bytes.push_back(std::byte{0});
  EXPECT_FALSE(decode(bytes, 4));
}

// Flow control: only an eager message with a payload may spend a credit, and no other
// flag bit exists; credits given back ride in any header.
TEST(WireTest, CreditFlagOnlyOnEagerPayloads) {
  auto bytes = eager(16);
  MessageHeader header;
  std::memcpy(&header, bytes.data(), sizeof header);
  header.flags = kUsesCredit;
  header.credits_returned = 9;
  std::memcpy(bytes.data(), &header, sizeof header);
  auto message = decode(bytes, 4);
  ASSERT_TRUE(message) << message.error().message();
  EXPECT_EQ(message->header.credits_returned, 9u);
  header.flags = kUsesCredit | 4;
  std::memcpy(bytes.data(), &header, sizeof header);
  EXPECT_NE(decode(bytes, 4).error().message().find("unknown header flags 0x5"), std::string::npos);
  auto empty = eager(0);
  std::memcpy(&header, empty.data(), sizeof header);
  header.flags = kUsesCredit;
  std::memcpy(empty.data(), &header, sizeof header);
  EXPECT_NE(decode(empty, 4).error().message().find("a credit spent by a message without an eager payload"),
            std::string::npos);
}

// A refused cts has nothing to write and the receiver's error code; with bytes to write or
// an unknown code it is malformed (a refused fin: below).
TEST(WireTest, RefusalOnlyOnACtsWithNothingToWriteAndAKnownError) {
  auto refusal = [](MessageKind kind, std::uint64_t bytes_to_write, std::uint64_t code) {
    MessageHeader header = make_header(kind, 1, 5, 0, 1 << 20);
    header.flags = kRefused;
    return encode(header, ClearToSend{{1, 1}, {2, 1}, {}, bytes_to_write, code});
  };
  auto accepted = decode(refusal(MessageKind::cts, 0, static_cast<std::uint64_t>(tether::Errc::memlock_limit)), 4);
  ASSERT_TRUE(accepted) << accepted.error().message();
  EXPECT_EQ(accepted->cts.chunk_bytes, static_cast<std::uint64_t>(tether::Errc::memlock_limit));
  for (auto bytes : {refusal(MessageKind::cts, 8, 3), refusal(MessageKind::cts, 0, 0), refusal(MessageKind::cts, 0, 999)}) {
    auto rejected = decode(bytes, 4);
    ASSERT_FALSE(rejected);
    EXPECT_NE(rejected.error().message().find("a refusal that is not a cts"), std::string::npos)
        << rejected.error().message();
  }
}

// A get or split receive that fails after it answered tells its sender with a FIN flagged
// kRefused, the error code in the header's size; an unknown code is malformed.
TEST(WireTest, RefusedFinCarriesAKnownErrorInItsSize) {
  auto refused_fin = [](std::uint64_t code) {
    MessageHeader header = make_header(MessageKind::fin, 1, 5, 0, code);
    header.flags = kRefused;
    return encode(header, RendezvousDone{{1, 1}});
  };
  auto accepted = decode(refused_fin(static_cast<std::uint64_t>(tether::Errc::transport)), 4);
  ASSERT_TRUE(accepted) << accepted.error().message();
  EXPECT_EQ(accepted->header.message_bytes, static_cast<std::uint64_t>(tether::Errc::transport));
  for (std::uint64_t code : {std::uint64_t{0}, std::uint64_t{999}}) EXPECT_FALSE(decode(refused_fin(code), 4)) << code;
}

// A put or split send whose write failed tells its receiver with an abort: the error code
// in the header's size, how many writes landed in the body; an unknown code is malformed.
TEST(WireTest, AbortCarriesAKnownErrorAndTheWritesThatLanded) {
  auto abort = [](std::uint64_t code) {
    return encode(make_header(MessageKind::abort, 1, 5, 0, code), RendezvousAbort{{3, 2}, 7});
  };
  auto accepted = decode(abort(static_cast<std::uint64_t>(tether::Errc::transport)), 4);
  ASSERT_TRUE(accepted) << accepted.error().message();
  EXPECT_EQ(accepted->header.message_bytes, static_cast<std::uint64_t>(tether::Errc::transport));
  EXPECT_EQ(accepted->abort.receiver_request.packed(), (RequestId{3, 2}.packed()));
  EXPECT_EQ(accepted->abort.writes_landed, 7u);
  for (std::uint64_t code : {std::uint64_t{0}, std::uint64_t{999}}) EXPECT_FALSE(decode(abort(code), 4)) << code;
  auto short_body = abort(static_cast<std::uint64_t>(tether::Errc::transport));
  short_body.resize(short_body.size() - 1);
  EXPECT_FALSE(decode(short_body, 4));
}

// Liveness probes are a bare header: exactly 32 bytes, anything after it is malformed.
std::vector<std::byte> channel_message(ChannelCarry carry, std::size_t payload, std::size_t claimed) {
  auto bytes = encode(make_header(MessageKind::channel, 1, 5, 0, claimed), carry);
  bytes.resize(bytes.size() + payload, std::byte{9});
  return bytes;
}

TEST(WireTest, ChannelMessageCarriesItsWordsAndPayload) {
  constexpr std::uint64_t kData = kChannelNotificationBit | (std::uint64_t{3} << 44) | 40;
  constexpr std::uint64_t kCredits = kChannelNotificationBit | (std::uint64_t{4} << 44) | (std::uint64_t{0xfff} << 32) | 2;
  auto bytes = channel_message({kData, kCredits}, 40, 40);
  auto message = decode(bytes, 2);
  ASSERT_TRUE(message) << message.error().message();
  EXPECT_EQ(message->channel.notification, kData);
  EXPECT_EQ(message->channel.credits, kCredits);
  ASSERT_EQ(message->payload.size(), 40u);
  EXPECT_EQ(message->payload.data(), bytes.data() + kChannelHeaderBytes);
  EXPECT_TRUE(decode(channel_message({0, kCredits}, 0, 0), 2));  // credits alone
  EXPECT_FALSE(decode(channel_message({kData, 0}, 39, 40), 2));  // shorter than it says
  EXPECT_FALSE(decode(channel_message({kData, 0}, 41, 40), 2));  // longer
  EXPECT_FALSE(decode(channel_message({kData, 0}, 0, std::uint64_t{1} << 60), 2));  // absurd length
  EXPECT_FALSE(decode(channel_message({40, 0}, 40, 40), 2));     // not a channel word
  EXPECT_FALSE(decode(channel_message({kData, 7}, 40, 40), 2));
  EXPECT_FALSE(decode(channel_message({0, 0}, 0, 0), 2));        // carries nothing
  EXPECT_FALSE(decode(channel_message({0, kCredits}, 8, 8), 2)); // a payload without a notification
}

TEST(WireTest, ProbesAreHeaderOnly) {
  for (MessageKind kind : {MessageKind::probe, MessageKind::probe_ack, MessageKind::credit}) {
    MessageHeader header = make_header(kind, 2, 0, 0, 0);
    std::vector<std::byte> bytes(sizeof header);
    std::memcpy(bytes.data(), &header, sizeof header);
    auto message = decode(bytes, 3);
    ASSERT_TRUE(message) << message.error().message();
    EXPECT_EQ(message->header.kind, kind);
    EXPECT_EQ(message->header.source_rank, 2u);
    bytes.push_back(std::byte{0});
    EXPECT_FALSE(decode(bytes, 3));
  }
}

TEST(WireTest, RejectsWrongMagicVersionKindAndRank) {
  auto bytes = eager(4);
  auto corrupt = [&](std::size_t offset, std::byte value) {
    auto copy = bytes;
    copy[offset] = value;
    return decode(copy, 4);
  };
  EXPECT_FALSE(corrupt(0, std::byte{0}));   // magic
  EXPECT_FALSE(corrupt(2, std::byte{9}));   // version
  EXPECT_FALSE(corrupt(3, std::byte{77}));  // kind
  EXPECT_FALSE(decode(eager(4, 9), 4));     // source rank outside the job
  auto error = decode(eager(4, 9), 4).error();
  EXPECT_NE(error.message().find("source rank 9"), std::string::npos) << error.message();
}

TEST(WireTest, RejectsCtsWritingPastItsTarget) {
  ClearToSend cts{};
  cts.target.length = 100;
  cts.bytes_to_write = 101;
  cts.chunk_bytes = 64;
  auto bytes = encode(make_header(MessageKind::cts, 1, 0, 0, 101), cts);
  auto message = decode(bytes, 2);
  ASSERT_FALSE(message);
  EXPECT_NE(message.error().message().find("101 bytes into a 100-byte target"), std::string::npos);
  cts.bytes_to_write = 100;
  EXPECT_TRUE(decode(encode(make_header(MessageKind::cts, 1, 0, 0, 100), cts), 2));
}

TEST(WireTest, RejectsGetRtsWithShortSource) {
  RendezvousRequest rts{};
  rts.protocol = RendezvousProtocol::get;
  rts.source.length = 10;
  EXPECT_FALSE(decode(encode(make_header(MessageKind::rts, 0, 0, 0, 11), rts), 2));
  rts.protocol = static_cast<RendezvousProtocol>(9);
  EXPECT_FALSE(decode(encode(make_header(MessageKind::rts, 0, 0, 0, 10), rts), 2));
}

TEST(WireTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937_64 random(1);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    std::vector<std::byte> bytes(random() % 200);
    for (auto& byte : bytes) byte = static_cast<std::byte>(random());
    if (i % 2 == 0 && bytes.size() >= 4) {  // keep magic and version right half the time
      auto header = make_header(MessageKind::eager, 0, 0, 0, 0);
      std::memcpy(bytes.data(), &header, 3);
    }
    accepted += decode(bytes, 8) ? 1 : 0;
  }
  EXPECT_LT(accepted, 1000);
}

}  // namespace
}  // namespace tether::messaging
