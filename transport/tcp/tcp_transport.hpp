// tcp-own: tether's own network transport over TCP sockets, for hosts without an RDMA
// NIC. Each endpoint listens on one socket; the first operation to a peer connects to
// it, and the pair keeps that one connection for both directions (so TCP's
// acknowledgements ride on the answers instead of costing packets of their own; two
// connections per pair measured 7.7 us one-way against 3.5 for one). The connecting side
// says hello and waits for the answer before sending; when both connected at once, the
// connection of the smaller address wins and the other's frames move onto it. RMA is emulated: a write
// frame's payload is received straight into the registered target memory after its key
// is checked, and acknowledged; a read request is answered with the bytes. The socket is
// polled with non-blocking recv from poll(), no thread. See transport/tcp/README.md.
#pragma once

#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <random>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/tcp/tcp_wire.hpp"
#include "transport/transport.hpp"

namespace tether::transport::tcp {

inline constexpr std::size_t kInputBufferBytes = 64 * 1024;           // per connection
inline constexpr std::size_t kMostDrainedBytes = 16 * 1024 * 1024;    // a closed connection's input may grow to
inline constexpr std::size_t kMostQueuedBytes = std::size_t{64} << 20;  // per connection, before retry
// What to do when a frame cannot be queued or copied for want of memory (static text:
// nothing is formatted on the out-of-memory path).
inline constexpr const char* kOutOfMemoryRemedy =
    "the process ran out of memory: raise its limit (ulimit -v, the job's cgroup memory.max) or run fewer ranks "
    "per node; tcp-own itself queues at most 64 MiB per peer that does not read, then answers retry";
static_assert(kMostQueuedBytes == std::size_t{64} << 20, "kOutOfMemoryRemedy names kMostQueuedBytes: update it");

// Whether a failed socket call only asks to come back later.
inline bool would_block(int error) noexcept { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

// Keys name registrations in a table the target checks every RMA against: no pinning
// (the kernel copies), so registering is a map insert. Keys are random 64-bit numbers,
// so a peer cannot guess one it was not handed. Thread-safe.
class TcpRegistrar final : public Registrar {
 public:
  [[nodiscard]] std::string_view name() const noexcept override { return "tcp-own"; }
  [[nodiscard]] Expected<Registration> register_range(void* address, std::size_t length, Access access) override;
  void deregister(const Registration& registration) noexcept override;
  // Whether `key` grants `access` to [address, address + length).
  [[nodiscard]] bool allows(std::uint64_t key, std::uint64_t address, std::uint64_t length, Access access) const;

 private:
  struct Range {
    std::uint64_t address;
    std::uint64_t length;
    Access access;
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, Range> ranges_;
  std::mt19937_64 random_keys_{seeded()};
  static std::mt19937_64 seeded();
};

// A frame waiting for the socket. The payload is the caller's buffer (kept until the
// send completes) or `owned` (sends reported done before they left).
struct OutgoingFrame {
  FrameHeader header;
  const std::byte* payload = nullptr;
  std::size_t sent = 0;                 // of header + payload
  std::vector<std::byte> owned;
  bool completes_send = false;          // report send_done with `context` once sent
  std::uint64_t context = 0;
};

// Where the payload of the frame being received goes.
struct IncomingFrame {
  FrameHeader header;
  bool active = false;       // header taken, payload (if any) pending
  std::byte* target = nullptr;
  std::size_t room = 0;      // payload bytes `target` takes; the rest is discarded
  std::size_t left = 0;      // payload bytes still on the stream
  std::size_t taken = 0;     // payload bytes received so far
  std::uint64_t context = 0; // message: the posted receive's context
  std::size_t receive_length = 0;  // message: the posted receive's length
};

enum class LinkState : std::uint8_t {
  awaiting_reply,   // we connected and said hello: frames wait for the reply
  open,             // frames flow both ways
  parked,           // the peer's own connection won (socket closed): frames wait for it
  draining,         // the peer closed (socket closed): whole frames it sent are still handed out
};

struct Connection {
  int fd = -1;
  PeerIndex peer = kUnknownPeer;   // accepted: resolved from the hello, maybe later
  LinkState state = LinkState::open;
  bool accepted = false;           // the peer connected to us (it says hello first)
  bool said_hello = false;         // accepted: the peer's hello arrived
  bool dialing = false;            // ours: connect() under way, the hello not sent yet
  std::chrono::steady_clock::time_point dial_started{};
  Hello hello{};                   // accepted: the peer's hello (hello.from: its address)
  std::unique_ptr<std::byte[]> input;
  std::size_t input_begin = 0, input_end = 0;
  std::size_t input_capacity = kInputBufferBytes;
  IncomingFrame incoming;
  std::deque<OutgoingFrame> output;
  std::size_t output_bytes = 0;    // queued and not yet sent
};

struct TcpPeer {
  WireAddress address{};
  Connection* connection = nullptr;  // the one frames to it go on, once there is one
  bool dead = false;
};

// A write or read waiting for the peer's answer; `operation` ids are index | generation << 32.
struct PendingOperation {
  CompletionKind kind = CompletionKind::error;
  PeerIndex peer = kUnknownPeer;
  std::uint64_t context = 0;
  void* buffer = nullptr;
  std::size_t length = 0;
  std::uint32_t generation = 0;
  bool live = false;
};

class TcpTransport final : public Transport {
 public:
  // `interface`: an interface name or IPv4 address to listen on; "" = TETHER_TCP_INTERFACE.
  static Expected<std::unique_ptr<Transport>> open(const std::string& interface);
  ~TcpTransport() override;

  // "tcp-own:<interface>" (or the address TETHER_TCP_INTERFACE gave).
  [[nodiscard]] std::string_view name() const noexcept override { return name_; }
  [[nodiscard]] const Limits& limits() const noexcept override { return limits_; }
  [[nodiscard]] Registrar& registrar() noexcept override { return registrar_; }
  [[nodiscard]] std::span<const std::byte> address() const noexcept override;
  [[nodiscard]] Expected<PeerIndex> insert_peer(std::span<const std::byte> address) override;

  [[nodiscard]] Status post_receive(void* buffer, std::size_t length, void* descriptor,
                                    std::uint64_t context) noexcept override;
  [[nodiscard]] Status send(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] Status write(PeerIndex peer, const void* buffer, std::size_t length, void* descriptor,
                             const RemoteBuffer& target, std::size_t target_offset,
                             std::uint64_t context) noexcept override;
  [[nodiscard]] Status write_with_notification(PeerIndex peer, const void* buffer, std::size_t length,
                                               void* descriptor, const RemoteBuffer& target,
                                               std::size_t target_offset, std::uint64_t notification,
                                               std::uint64_t context) noexcept override;
  [[nodiscard]] Status read(PeerIndex peer, void* buffer, std::size_t length, void* descriptor,
                            const RemoteBuffer& source, std::size_t source_offset,
                            std::uint64_t context) noexcept override;
  [[nodiscard]] std::size_t poll(std::span<Completion> out) noexcept override;
  [[nodiscard]] bool range_keys_are_cheap() const noexcept override { return true; }
  [[nodiscard]] bool sends_beat_small_writes(PeerIndex) const noexcept override { return true; }
  [[nodiscard]] bool delivers_in_order(PeerIndex) const noexcept override { return true; }  // one connection per pair
  [[nodiscard]] bool holds_unsent() const noexcept override;

 private:
  TcpTransport() = default;
  Expected<void> listen_on(const std::string& interface);

  // Dialling (tcp_dial.cpp).
  Connection* connection_to(PeerIndex peer) noexcept;
  void finish_dials() noexcept;
  int finish_dial(Connection& connection) noexcept;
  [[nodiscard]] bool dial_timed_out(const Connection& connection) const noexcept;
  Connection* fail_connect(PeerIndex peer, int error) noexcept;
  Connection* fail_for_local_shortage(PeerIndex peer, int error) noexcept;
  void dial_failed(Connection& connection, int error, bool timed_out) noexcept;
  [[nodiscard]] std::string describe(PeerIndex peer) const;

  // Connections (tcp_connect.cpp).
  Connection* adopt(int fd, LinkState state, bool accepted) noexcept;
  void choose_congestion(int fd, std::uint32_t remote_ipv4) noexcept;
  void accept_new() noexcept;
  void resolve(Connection& connection) noexcept;
  void take_hello(Connection& connection) noexcept;
  void reply_to_hello(Connection& connection, FrameStatus status) noexcept;
  void take_hello_reply(Connection& connection, FrameStatus status) noexcept;
  void shut(Connection& connection, LinkState state) noexcept;
  void close_connection(Connection& connection, const char* cause) noexcept;
  void lose_peer(Connection& connection, const char* cause) noexcept;
  void end_of_stream(Connection& connection, const char* cause) noexcept;
  void read_what_is_left(Connection& connection) noexcept;
  void end_draining(Connection& connection) noexcept;
  void give_back_cut_receive(Connection& connection) noexcept;

  // Posting (tcp_post.cpp).
  enum class Keep : std::uint8_t { copy, until_sent, until_answered };
  Status start_rma(PeerIndex peer, FrameHeader& header, const void* buffer, std::size_t length, CompletionKind kind,
                   const RemoteBuffer& remote, std::size_t offset, std::uint64_t context) noexcept;
  Status queue_frame(Connection& connection, const FrameHeader& header, const void* payload, Keep keep,
                     std::uint64_t context) noexcept;
  static Status keep_unsent(OutgoingFrame& frame, Keep keep) noexcept;
  Status drop_uncopied(Connection& connection, std::size_t sent) noexcept;
  Status close_half_sent(Connection& connection, const char* cause) noexcept;
  bool enqueue(Connection& connection, const FrameHeader& header, const void* payload, std::uint64_t context,
               std::size_t sent = 0) noexcept;
  std::size_t send_now(Connection& connection, const FrameHeader& header, const void* payload) noexcept;
  void queue_answer(Connection& connection, const FrameHeader& header, const void* payload) noexcept;
  bool flush(Connection& connection) noexcept;
  std::uint64_t add_pending(const PendingOperation& operation);
  PendingOperation* find_pending(std::uint64_t operation) noexcept;
  void retire_pending(PendingOperation& operation) noexcept;

  // Receiving (tcp_poll.cpp).
  void receive_ready() noexcept;
  void receive_from(Connection& connection) noexcept;
  void take_buffered(Connection& connection) noexcept;
  void take_hello_frame(Connection& connection) noexcept;
  bool take_header(Connection& connection) noexcept;
  bool frame_allowed(Connection& connection, const FrameHeader& header) noexcept;
  void route_payload(Connection& connection) noexcept;
  void take_payload(Connection& connection) noexcept;
  void finish_frame(Connection& connection) noexcept;
  void answer_read(Connection& connection, const FrameHeader& request) noexcept;
  void complete_rma(Connection& connection, const FrameHeader& answer);
  void complete(CompletionKind kind, PeerIndex peer, std::uint64_t context, void* buffer, std::size_t length,
                std::uint64_t notification = 0);
  void complete_error(CompletionKind failed, Errc error, PeerIndex peer, std::uint64_t context, const char* cause);

  struct PostedReceive {
    void* buffer;
    std::size_t length;
    std::uint64_t context;
  };

  TcpRegistrar registrar_;
  std::string name_;
  Limits limits_;
  WireAddress address_{};
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int socket_buffer_bytes_ = 0;  // TETHER_TCP_SOCKET_BUFFER  // every connection and the listening socket, for polls of many
  std::vector<TcpPeer> peers_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::deque<PostedReceive> receives_;
  std::deque<Completion> completions_;
  std::vector<PendingOperation> pending_;
  std::vector<std::uint32_t> free_pending_;
  std::chrono::nanoseconds connect_timeout_{};  // TETHER_TCP_CONNECT_TIMEOUT
  std::string congestion_;                      // TETHER_TCP_CONGESTION
  bool congestion_refused_ = false;             // the kernel refused it once (warned)
  std::size_t dialing_ = 0;                      // connections whose connect is under way
  std::uint32_t polls_ = 0;
  bool closed_any_ = false;  // a connection was shut since the last sweep
};

}  // namespace tether::transport::tcp
