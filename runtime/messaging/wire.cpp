#include "runtime/messaging/wire.hpp"

#include <cstring>

#include <fmt/format.h>

namespace tether::messaging {
namespace {

tl::unexpected<Error> malformed(std::string cause) {
  return make_error(Errc::invalid_argument, "malformed message: " + std::move(cause),
                    "the peer runs another tether version or is corrupting memory; message dropped");
}

std::size_t body_bytes(MessageKind kind) noexcept {
  switch (kind) {
    case MessageKind::eager: return 0;
    case MessageKind::rts: return sizeof(RendezvousRequest);
    case MessageKind::cts: return sizeof(ClearToSend);
    case MessageKind::fin: return sizeof(RendezvousDone);
    case MessageKind::abort: return sizeof(RendezvousAbort);
    case MessageKind::channel: return sizeof(ChannelCarry);
    case MessageKind::probe:
    case MessageKind::probe_ack:
    case MessageKind::credit: return 0;
  }
  return 0;
}

bool known_kind(MessageKind kind) noexcept {
  auto value = static_cast<std::uint8_t>(kind);
  return value >= 1 && value <= 9;
}

template <class Body>
Body read_body(std::span<const std::byte> bytes) {
  Body body;
  std::memcpy(&body, bytes.data() + sizeof(MessageHeader), sizeof(Body));
  return body;
}

// A refused CTS (the receiver cannot expose its buffer) carries nothing to write and its
// error code in chunk_bytes; a refused FIN (a get or split receive failed after it
// answered) carries its error code in the header's message_bytes.
bool refusal_well_formed(const DecodedMessage& message) {
  if (message.header.kind == MessageKind::fin) return is_error_code(message.header.message_bytes);
  return message.header.kind == MessageKind::cts && message.cts.bytes_to_write == 0 &&
         is_error_code(message.cts.chunk_bytes);
}

Expected<void> check_body(const DecodedMessage& message) {
  if (message.header.kind == MessageKind::rts) {
    auto protocol = message.rts.protocol;
    if (protocol != RendezvousProtocol::put && protocol != RendezvousProtocol::get &&
        protocol != RendezvousProtocol::split)
      return malformed(fmt::format("rts names protocol {}", static_cast<int>(protocol)));
    if (message.rts.source.length < message.header.message_bytes && protocol != RendezvousProtocol::put)
      return malformed("rts offers a source shorter than the message");
  }
  if (message.header.kind == MessageKind::abort && !is_error_code(message.header.message_bytes))
    return malformed("an abort without a known error code");
  if (message.header.kind == MessageKind::channel) {
    const ChannelCarry& carry = message.channel;
    if ((carry.notification != 0 && (carry.notification & kChannelNotificationBit) == 0) ||
        (carry.credits != 0 && (carry.credits & kChannelNotificationBit) == 0))
      return malformed("a channel message carries a word that is not a channel notification");
    if (carry.notification == 0 && (carry.credits == 0 || message.header.message_bytes != 0))
      return malformed("a channel message without a notification carries a payload or nothing at all");
  }
  if ((message.header.flags & ~(kUsesCredit | kRefused)) != 0)
    return malformed(fmt::format("unknown header flags {:#x}", message.header.flags));
  if ((message.header.flags & kRefused) != 0 && !refusal_well_formed(message))
    return malformed("a refusal that is not a cts with nothing to write or a fin, with a known error code");
  if ((message.header.flags & kUsesCredit) != 0 &&
      (message.header.kind != MessageKind::eager || message.header.message_bytes == 0))
    return malformed("a credit spent by a message without an eager payload");
  if (message.header.kind == MessageKind::cts) {
    if (message.cts.bytes_to_write > message.cts.target.length)
      return malformed(fmt::format("cts asks to write {} bytes into a {}-byte target",
                                   message.cts.bytes_to_write, message.cts.target.length));
    if (message.cts.chunk_bytes == 0 && message.cts.bytes_to_write > 0) return malformed("cts has a zero chunk size");
  }
  return {};
}

}  // namespace

Expected<DecodedMessage> decode(std::span<const std::byte> bytes, int job_size) {
  if (bytes.size() < sizeof(MessageHeader))
    return malformed(fmt::format("{} bytes is shorter than a header", bytes.size()));
  DecodedMessage message;
  std::memcpy(&message.header, bytes.data(), sizeof(MessageHeader));
  const MessageHeader& header = message.header;
  if (header.magic != kWireMagic) return malformed(fmt::format("bad magic {:#x}", header.magic));
  if (header.version != kWireVersion)
    return malformed(fmt::format("wire version {} (this build speaks {})", header.version, kWireVersion));
  if (!known_kind(header.kind)) return malformed(fmt::format("unknown kind {}", static_cast<int>(header.kind)));
  if (header.source_rank >= static_cast<std::uint32_t>(job_size))
    return malformed(fmt::format("source rank {} in a job of {}", header.source_rank, job_size));
  std::size_t expected = sizeof(MessageHeader) + body_bytes(header.kind);
  bool carries_payload = header.kind == MessageKind::eager || header.kind == MessageKind::channel;
  if (carries_payload) {
    if (header.message_bytes > (std::uint64_t{1} << 48))  // keeps the sum below from wrapping
      return malformed(fmt::format("header claims {} payload bytes", header.message_bytes));
    expected += header.message_bytes;
  }
  // Exact size: kinds with a payload (counted above) and header-only kinds.
  bool exact = carries_payload || body_bytes(header.kind) == 0;
  if (exact ? bytes.size() != expected : bytes.size() < expected)
    return malformed(fmt::format("{} message of {} bytes, header says {}", static_cast<int>(header.kind),
                                 bytes.size(), expected));
  auto after_header = bytes.subspan(sizeof(MessageHeader));
  if (header.kind == MessageKind::eager) message.payload = after_header;
  if (header.kind == MessageKind::channel) {
    message.channel = read_body<ChannelCarry>(bytes);
    message.payload = after_header.subspan(sizeof(ChannelCarry));
  }
  if (header.kind == MessageKind::rts) message.rts = read_body<RendezvousRequest>(bytes);
  if (header.kind == MessageKind::cts) message.cts = read_body<ClearToSend>(bytes);
  if (header.kind == MessageKind::fin) message.fin = read_body<RendezvousDone>(bytes);
  if (header.kind == MessageKind::abort) message.abort = read_body<RendezvousAbort>(bytes);
  auto body = check_body(message);
  if (!body) return tl::unexpected(body.error());
  return message;
}

MessageHeader make_header(MessageKind kind, int source_rank, int tag, std::uint32_t sequence,
                          std::uint64_t message_bytes) noexcept {
  return MessageHeader{kWireMagic, kWireVersion, kind, static_cast<std::uint32_t>(source_rank),
                       tag, sequence, message_bytes, 0, 0};
}

void write_channel_header(std::byte* out, int source_rank, int tag, std::size_t payload_bytes,
                          const ChannelCarry& carry) noexcept {
  MessageHeader header = make_header(MessageKind::channel, source_rank, tag, 0, payload_bytes);
  std::memcpy(out, &header, sizeof header);
  std::memcpy(out + sizeof header, &carry, sizeof carry);
}

}  // namespace tether::messaging
