// messaging::decode on any bytes. Input: one byte for the job size (1..256), then the
// message. Checks what an accepted message promises the engine, that encoding its fields
// again decodes to the same message, and that read_eager agrees with decode.
#include <vector>

#include "runtime/messaging/wire.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

using namespace tether::messaging;

void check_limits(const DecodedMessage& message, std::span<const std::byte> bytes, int job_size) {
  const MessageHeader& header = message.header;
  FUZZ_ASSERT(header.magic == kWireMagic && header.version == kWireVersion);
  FUZZ_ASSERT(header.source_rank < static_cast<std::uint32_t>(job_size));
  FUZZ_ASSERT((header.flags & ~(kUsesCredit | kRefused)) == 0);
  constexpr auto kLastError = static_cast<std::uint64_t>(tether::Errc::config);
  FUZZ_ASSERT((header.flags & kRefused) == 0 ||
              (header.kind == MessageKind::cts && message.cts.bytes_to_write == 0 && message.cts.chunk_bytes > 0 &&
               message.cts.chunk_bytes <= kLastError) ||
              (header.kind == MessageKind::fin && header.message_bytes > 0 && header.message_bytes <= kLastError));
  FUZZ_ASSERT((header.flags & kUsesCredit) == 0 || (header.kind == MessageKind::eager && header.message_bytes > 0));
  if (header.kind == MessageKind::eager) {
    FUZZ_ASSERT(message.payload.size() == header.message_bytes);
    FUZZ_ASSERT(message.payload.data() == bytes.data() + sizeof(MessageHeader));
    FUZZ_ASSERT(sizeof(MessageHeader) + message.payload.size() == bytes.size());
  }
  if (header.kind == MessageKind::channel) {
    FUZZ_ASSERT(message.payload.size() == header.message_bytes);
    FUZZ_ASSERT(message.payload.data() == bytes.data() + kChannelHeaderBytes);
    FUZZ_ASSERT(kChannelHeaderBytes + message.payload.size() == bytes.size());
    const ChannelCarry& carry = message.channel;
    FUZZ_ASSERT(carry.notification != 0 || (carry.credits != 0 && message.payload.empty()));
    FUZZ_ASSERT(carry.notification == 0 || (carry.notification & kChannelNotificationBit) != 0);
    FUZZ_ASSERT(carry.credits == 0 || (carry.credits & kChannelNotificationBit) != 0);
  }
  if (header.kind == MessageKind::abort) FUZZ_ASSERT(header.message_bytes > 0 && header.message_bytes <= kLastError);
  if (header.kind == MessageKind::cts) {
    FUZZ_ASSERT(message.cts.bytes_to_write <= message.cts.target.length);
    FUZZ_ASSERT(message.cts.bytes_to_write == 0 || message.cts.chunk_bytes > 0);
  }
  if (header.kind == MessageKind::rts) {
    FUZZ_ASSERT(message.rts.protocol == RendezvousProtocol::put || message.rts.protocol == RendezvousProtocol::get ||
                message.rts.protocol == RendezvousProtocol::split);
    FUZZ_ASSERT(message.rts.protocol == RendezvousProtocol::put || message.rts.source.length >= header.message_bytes);
  }
}

template <class Body>
std::vector<std::byte> encoded(const MessageHeader& header, const Body& body) {
  std::vector<std::byte> bytes(sizeof header + sizeof body);
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + sizeof header, &body, sizeof body);
  return bytes;
}

// The message rebuilt from its decoded fields, the way the engine builds one.
std::vector<std::byte> reencode(const DecodedMessage& message) {
  const MessageHeader& in = message.header;
  MessageHeader header = make_header(in.kind, static_cast<int>(in.source_rank), in.tag, in.sequence, in.message_bytes);
  header.credits_returned = in.credits_returned;
  header.flags = in.flags;
  switch (in.kind) {
    case MessageKind::rts: return encoded(header, message.rts);
    case MessageKind::cts: return encoded(header, message.cts);
    case MessageKind::fin: return encoded(header, message.fin);
    case MessageKind::abort: return encoded(header, message.abort);
    case MessageKind::channel: {
      std::vector<std::byte> bytes = encoded(header, message.channel);
      bytes.insert(bytes.end(), message.payload.begin(), message.payload.end());
      return bytes;
    }
    case MessageKind::eager:
    case MessageKind::probe:
    case MessageKind::probe_ack:
    case MessageKind::credit: break;  // header, then the payload (none but for eager)
  }
  std::vector<std::byte> bytes(sizeof header + message.payload.size());
  std::memcpy(bytes.data(), &header, sizeof header);
  if (!message.payload.empty()) std::memcpy(bytes.data() + sizeof header, message.payload.data(), message.payload.size());
  return bytes;
}

void check_round_trip(const DecodedMessage& message, int job_size) {
  std::vector<std::byte> again = reencode(message);
  auto decoded = decode(again, job_size);
  FUZZ_ASSERT(decoded.has_value());
  FUZZ_ASSERT(std::memcmp(&decoded->header, &message.header, sizeof(MessageHeader)) == 0);
  FUZZ_ASSERT(decoded->payload.size() == message.payload.size());
  FUZZ_ASSERT(message.payload.empty() ||
              std::memcmp(decoded->payload.data(), message.payload.data(), message.payload.size()) == 0);
  FUZZ_ASSERT(std::memcmp(&decoded->cts, &message.cts, sizeof(ClearToSend)) == 0);
  FUZZ_ASSERT(std::memcmp(&decoded->rts, &message.rts, sizeof(RendezvousRequest)) == 0);
  FUZZ_ASSERT(decoded->fin.sender_request.packed() == message.fin.sender_request.packed());
  FUZZ_ASSERT(std::memcmp(&decoded->abort, &message.abort, sizeof(RendezvousAbort)) == 0);
  FUZZ_ASSERT(std::memcmp(&decoded->channel, &message.channel, sizeof(ChannelCarry)) == 0);
}

// read_eager (the in-place receive's check) accepts exactly the eager messages decode
// accepts, with the same header and payload.
void check_read_eager(const tether::Expected<DecodedMessage>& message, std::span<const std::byte> bytes, int job_size) {
  EagerView view;
  bool read = read_eager(bytes, job_size, view);
  FUZZ_ASSERT(read == (message.has_value() && message->header.kind == MessageKind::eager));
  if (!read) return;
  FUZZ_ASSERT(std::memcmp(&view.header, &message->header, sizeof(MessageHeader)) == 0);
  FUZZ_ASSERT(view.payload.data() == message->payload.data() && view.payload.size() == message->payload.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tether::fuzz::InputReader input(data, size);
  int job_size = 1 + input.take<std::uint8_t>();
  std::span<const std::byte> bytes = input.rest();
  // A copy of exactly the message: reads past it are caught by ASan.
  std::vector<std::byte> message_bytes(bytes.begin(), bytes.end());
  auto message = decode(message_bytes, job_size);
  check_read_eager(message, message_bytes, job_size);
  if (!message) {
    FUZZ_ASSERT(!message.error().message().empty());
    return 0;
  }
  check_limits(*message, message_bytes, job_size);
  check_round_trip(*message, job_size);
  return 0;
}
