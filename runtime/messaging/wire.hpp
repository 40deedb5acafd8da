// Wire headers of tether's point-to-point protocol. Every header starts with the same
// 32-byte MessageHeader; rendezvous control messages append one fixed body. Rule: append
// fields, never reorder; bump kWireVersion when a field changes meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tether/error.hpp"
#include "transport/transport.hpp"

namespace tether::messaging {

inline constexpr std::uint16_t kWireMagic = 0x7e7a;  // "te" + protocol
inline constexpr std::uint8_t kWireVersion = 2;

enum class MessageKind : std::uint8_t {
  eager = 1,  // payload follows the header
  rts = 2,    // ready to send: RendezvousRequest follows
  cts = 3,    // clear to send: ClearToSend follows
  fin = 4,    // get and split: the receiver is done with the source; RendezvousDone follows
  probe = 5,      // are you there? (liveness, TETHER_PEER_TIMEOUT); header only
  probe_ack = 6,  // yes; header only
  credit = 7,     // eager credits given back (header's credits_returned); header only
  channel = 8,    // a persistent channel's small message or credits: ChannelCarry, then the payload
  abort = 9,      // put and split: the sender's writes failed (error code in message_bytes); RendezvousAbort follows
};

struct MessageHeader {
  std::uint16_t magic;
  std::uint8_t version;
  MessageKind kind;
  std::uint32_t source_rank;
  std::int32_t tag;
  std::uint32_t sequence;      // per (source, destination) pair, eager and rts only
  std::uint64_t message_bytes; // size of the user message (eager: payload bytes)
  std::uint32_t credits_returned;  // eager credits the sender gives back to the destination
  std::uint32_t flags;             // kUsesCredit
};
static_assert(sizeof(MessageHeader) == 32);
// An eager message with a payload spends one of the credits its destination lent; the
// destination gives it back once a receive took the message (engine_credits.cpp).
inline constexpr std::uint32_t kUsesCredit = 1;
// On a cts only: the receiver cannot land the message (its buffer could not be exposed).
// Nothing is to be written (bytes_to_write 0); chunk_bytes carries the receiver's Errc,
// and the sender's request fails with it.
inline constexpr std::uint32_t kRefused = 2;

// Identifies a request on the side that owns it: slot index and generation.
struct RequestId {
  std::uint32_t index;
  std::uint32_t generation;
  [[nodiscard]] std::uint64_t packed() const noexcept {
    return (std::uint64_t{generation} << 32) | index;
  }
  static RequestId unpack(std::uint64_t value) noexcept {
    return {static_cast<std::uint32_t>(value), static_cast<std::uint32_t>(value >> 32)};
  }
};

// put: the receiver answers a CTS and the sender writes; get: the receiver reads and sends
// FIN; split: both at once, the sender writing the first half (CTS) while the receiver reads
// the rest, then FIN (two cores copy where the transport maps memory).
enum class RendezvousProtocol : std::uint8_t { put = 1, get = 2, split = 3 };

struct RendezvousRequest {            // after an rts header
  RequestId sender_request;
  transport::RemoteBuffer source;     // the sender's buffer, for the get and split variants
  RendezvousProtocol protocol;
  std::uint8_t padding[7];
};

struct ClearToSend {                  // after a cts header
  RequestId sender_request;
  RequestId receiver_request;
  transport::RemoteBuffer target;     // where the sender writes
  std::uint64_t bytes_to_write;       // min(message, posted buffer); split: its first half
  std::uint64_t chunk_bytes;          // writes are split at this size, one notification each
};

struct RendezvousDone {               // after a fin header
  RequestId sender_request;
};

struct RendezvousAbort {              // after an abort header
  RequestId receiver_request;
  std::uint64_t writes_landed;        // chunk writes that completed: their notifications come, no others
};

// Notifications with this bit set belong to persistent channels; rendezvous chunk
// notifications (a RequestId with a 31-bit generation) never set it.
inline constexpr std::uint64_t kChannelNotificationBit = std::uint64_t{1} << 63;

// After a channel header (message_bytes = payload bytes). Each word is a channel
// notification (kChannelNotificationBit set) as an RMA write would carry it, or 0: the
// message that lands in the target's slot, and credits for a send channel of the target.
struct ChannelCarry {
  std::uint64_t notification;
  std::uint64_t credits;
};
inline constexpr std::size_t kChannelHeaderBytes = sizeof(MessageHeader) + sizeof(ChannelCarry);
// Whether a code read off the wire names an error: not ok, and not beyond the last one.
[[nodiscard]] constexpr bool is_error_code(std::uint64_t code) noexcept {
  return code != 0 && code <= static_cast<std::uint64_t>(Errc::config);
}
// Writes a channel message's header and carry (kChannelHeaderBytes) at `out`.
void write_channel_header(std::byte* out, int source_rank, int tag, std::size_t payload_bytes,
                          const ChannelCarry& carry) noexcept;

inline constexpr std::size_t kControlMessageBytes = sizeof(MessageHeader) + sizeof(ClearToSend);

// A header that passed validation, with views of what follows it.
struct DecodedMessage {
  MessageHeader header;
  std::span<const std::byte> payload;  // eager and channel
  RendezvousRequest rts{};
  ClearToSend cts{};
  RendezvousDone fin{};
  RendezvousAbort abort{};
  ChannelCarry channel{};
};

// Checks magic, version, kind, lengths against `bytes` and the job size. Never reads past
// `bytes`. The error names what was wrong, for the log.
[[nodiscard]] Expected<DecodedMessage> decode(std::span<const std::byte> bytes, int job_size);

// An eager message that decode() would accept, read without building a DecodedMessage: the
// in-place receive path's check. False for anything else (other kinds, and everything
// decode() would reject), which then takes decode() and its error. tests/fuzz holds
// the two to the same verdict and the same header and payload.
struct EagerView {
  MessageHeader header;
  std::span<const std::byte> payload;
};
[[nodiscard]] inline bool read_eager(std::span<const std::byte> bytes, int job_size, EagerView& view) noexcept {
  if (bytes.size() < sizeof(MessageHeader)) return false;
  MessageHeader& header = view.header;
  std::memcpy(&header, bytes.data(), sizeof header);
  bool spends_credit = header.flags == kUsesCredit;
  bool well_formed = header.magic == kWireMagic && header.version == kWireVersion &&
                     header.kind == MessageKind::eager && header.source_rank < static_cast<std::uint32_t>(job_size) &&
                     header.message_bytes == bytes.size() - sizeof header && (header.flags == 0 || spends_credit) &&
                     (!spends_credit || header.message_bytes != 0);
  view.payload = bytes.subspan(sizeof header);
  return well_formed;
}

MessageHeader make_header(MessageKind kind, int source_rank, int tag, std::uint32_t sequence,
                          std::uint64_t message_bytes) noexcept;

}  // namespace tether::messaging
