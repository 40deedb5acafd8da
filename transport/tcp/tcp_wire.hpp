// What tcp-own puts on a TCP stream: a fixed 48-byte frame header, then the frame's
// payload. Host byte order (the ranks of a job run the same build); the magic word
// catches a stream that lost its framing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tether::transport::tcp {

inline constexpr std::uint32_t kFrameMagic = 0x50435454;    // "TTCP"
inline constexpr std::uint32_t kAddressMagic = 0x41435454;  // "TTCA"
inline constexpr std::uint16_t kWireVersion = 2;  // 2: addresses carry a token, hellos quote it

enum class FrameKind : std::uint8_t {
  hello = 1,      // first frame of a connection: payload is a Hello
  message,        // a send: payload lands in the oldest posted receive
  write,          // payload lands at (address, key); answered by write_ack
  read_request,   // asks for `length` bytes at (address, key); answered by read_response
  read_response,  // payload: the bytes read (none when status says why not)
  write_ack,      // the write named by `operation` landed (or status says why not)
  hello_reply,    // to a hello: ok (use this connection) or rejected (ours to you wins)
};

enum class FrameStatus : std::uint16_t { ok = 0, bad_key = 1, rejected = 2 };

inline constexpr std::uint8_t kFlagNotification = 1;  // write: report `notification` at the target

struct FrameHeader {
  std::uint32_t magic = kFrameMagic;
  FrameKind kind = FrameKind::message;
  std::uint8_t flags = 0;
  FrameStatus status = FrameStatus::ok;
  std::uint64_t length = 0;        // payload bytes (read_request: bytes asked for)
  std::uint64_t operation = 0;     // the initiator's id of a write or read, echoed back
  std::uint64_t address = 0;       // write, read_request: target address in the owner's view
  std::uint64_t key = 0;           // write, read_request: the registration's key
  std::uint64_t notification = 0;  // write with kFlagNotification
};
static_assert(sizeof(FrameHeader) == 48);

// What address() hands to peers.
struct WireAddress {
  std::uint32_t magic = kAddressMagic;
  std::uint16_t version = kWireVersion;
  std::uint16_t port = 0;      // network byte order
  std::uint32_t ipv4 = 0;      // network byte order
  std::uint32_t pid = 0;
  std::uint64_t instance = 0;  // distinguishes endpoints of one process
  std::uint64_t token = 0;     // random: known only to whoever read this address (the job, via PMIx)
};
static_assert(sizeof(WireAddress) == 32);

// The same endpoint (the token is a secret, not part of the name).
inline bool operator==(const WireAddress& a, const WireAddress& b) noexcept {
  return a.magic == b.magic && a.version == b.version && a.port == b.port && a.ipv4 == b.ipv4 && a.pid == b.pid &&
         a.instance == b.instance;
}

// The connecting side's first frame: who it is (its token left out: whoever answers the
// connection must not learn it), and the token of the address it connected to, which a
// process that never read that address cannot know.
struct Hello {
  WireAddress from{};
  std::uint64_t your_token = 0;
};
static_assert(sizeof(Hello) == 40);

// The order that decides whose connection a pair keeps when both connected at once.
inline bool operator<(const WireAddress& a, const WireAddress& b) noexcept {
  if (a.ipv4 != b.ipv4) return a.ipv4 < b.ipv4;
  if (a.port != b.port) return a.port < b.port;
  if (a.pid != b.pid) return a.pid < b.pid;
  return a.instance < b.instance;
}

// Payload bytes that follow the header on the stream (a read request names bytes it wants).
inline std::size_t payload_on_wire(const FrameHeader& header) noexcept {
  return header.kind == FrameKind::read_request ? 0 : header.length;
}

// Whether a header read off the stream can be acted on; hello's payload must be a Hello.
inline bool frame_valid(const FrameHeader& header) noexcept {
  if (header.magic != kFrameMagic) return false;
  if (header.kind < FrameKind::hello || header.kind > FrameKind::hello_reply) return false;
  if (header.kind == FrameKind::hello) return header.length == sizeof(Hello);
  if (header.kind == FrameKind::write_ack || header.kind == FrameKind::hello_reply) return header.length == 0;
  return true;
}

}  // namespace tether::transport::tcp
