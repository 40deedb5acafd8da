// Polling: flush queued frames, then take every frame the sockets hold. A frame's header
// is read into the connection's input buffer; its payload goes to the oldest posted
// receive (message), the registered memory its key names (write, after the check), or
// the reader's buffer (read_response); large payloads are received straight there. A
// message with no receive posted waits in the socket (back-pressure on the sender), and
// still waits for one once its sender closed the connection.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/base/log.hpp"
#include "transport/tcp/tcp_socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace tether::transport::tcp {
namespace {

constexpr std::size_t kDirectBytes = 4096;      // payloads from here on skip the input buffer
constexpr std::uint32_t kAcceptEveryPolls = 64;
constexpr std::size_t kDirectPollLimit = 4;  // connections polled by recv each; more: epoll
constexpr int kEventsPerPoll = 64;

}  // namespace

void TcpTransport::complete(CompletionKind kind, PeerIndex peer, std::uint64_t context, void* buffer,
                            std::size_t length, std::uint64_t notification) {
  completions_.push_back(Completion{.kind = kind, .peer = peer, .context = context, .buffer = buffer, .length = length,
                                    .notification = notification});
}

void TcpTransport::complete_error(CompletionKind failed, Errc error, PeerIndex peer, std::uint64_t context,
                                  const char* cause) {
  completions_.push_back(
      Completion{.failed_kind = failed, .error = error, .peer = peer, .context = context, .cause = cause});
}

// Whether `header` may come now on `connection`; if not, the connection is closed. A
// peer that connected says hello first and once; replies to hellos come only on ours.
bool TcpTransport::frame_allowed(Connection& connection, const FrameHeader& header) noexcept {
  const char* wrong = nullptr;
  if (!frame_valid(header)) wrong = "a malformed frame header";
  else if (header.kind == FrameKind::hello && (!connection.accepted || connection.said_hello)) wrong = "an unexpected hello";
  else if (header.kind != FrameKind::hello && connection.accepted && !connection.said_hello) wrong = "a frame before the hello";
  else if (header.kind == FrameKind::hello_reply && connection.state != LinkState::awaiting_reply)
    wrong = "a hello reply to no hello";
  else if (header.kind != FrameKind::hello_reply && connection.state == LinkState::awaiting_reply)
    wrong = "a frame before the hello reply";
  else if (header.kind == FrameKind::message && header.length > limits_.max_message_bytes) wrong = "a message over the limit";
  if (wrong == nullptr) return true;
  log::error("transport", "tcp-own: {} (magic {:#x}, kind {}, {} bytes) from {}: connection closed", wrong, header.magic,
             static_cast<unsigned>(header.kind), header.length,
             connection.peer == kUnknownPeer ? std::string("a peer not inserted") : fmt::format("peer {}", connection.peer));
  close_connection(connection, wrong);
  return false;
}

// Starts the frame whose header is next in the input; false when there is none yet, or
// it is a message and no receive is posted (it waits: back-pressure on the sender).
bool TcpTransport::take_header(Connection& connection) noexcept {
  if (connection.input_end - connection.input_begin < sizeof(FrameHeader)) return false;
  FrameHeader header;
  std::memcpy(&header, connection.input.get() + connection.input_begin, sizeof header);
  if (!frame_allowed(connection, header)) return false;
  if (header.kind == FrameKind::message && receives_.empty()) return false;
  connection.input_begin += sizeof header;
  connection.incoming = IncomingFrame{};
  connection.incoming.header = header;
  connection.incoming.active = true;
  connection.incoming.left = payload_on_wire(header);
  route_payload(connection);
  if (connection.incoming.left == 0) finish_frame(connection);
  return true;
}

// Where the current frame's payload lands: a posted receive, checked registered memory,
// the reader's buffer, or nowhere (discarded).
void TcpTransport::route_payload(Connection& connection) noexcept {
  IncomingFrame& incoming = connection.incoming;
  const FrameHeader& header = incoming.header;
  if (header.kind == FrameKind::hello) {
    incoming.target = reinterpret_cast<std::byte*>(&connection.hello);
    incoming.room = sizeof connection.hello;
  } else if (header.kind == FrameKind::message) {
    PostedReceive receive = receives_.front();
    receives_.pop_front();
    incoming.target = static_cast<std::byte*>(receive.buffer);
    incoming.room = std::min<std::size_t>(header.length, receive.length);
    incoming.context = receive.context;
    incoming.receive_length = receive.length;
  } else if (header.kind == FrameKind::write) {
    if (registrar_.allows(header.key, header.address, header.length, Access::remote_write)) {
      incoming.target = reinterpret_cast<std::byte*>(header.address);
      incoming.room = header.length;
    } else {
      incoming.header.status = FrameStatus::bad_key;
    }
  } else if (header.kind == FrameKind::read_response) {
    PendingOperation* operation = find_pending(header.operation);
    if (operation != nullptr && operation->kind == CompletionKind::read_done && operation->peer == connection.peer) {
      incoming.target = static_cast<std::byte*>(operation->buffer);
      incoming.room = std::min<std::size_t>(header.length, operation->length);
    }
  }
}

// Moves buffered payload bytes of the current frame to where they go.
void TcpTransport::take_payload(Connection& connection) noexcept {
  IncomingFrame& incoming = connection.incoming;
  std::size_t available = std::min(connection.input_end - connection.input_begin, incoming.left);
  if (incoming.taken < incoming.room) {
    std::size_t kept = std::min(available, incoming.room - incoming.taken);
    std::memcpy(incoming.target + incoming.taken, connection.input.get() + connection.input_begin, kept);
  }
  connection.input_begin += available;
  incoming.taken += available;
  incoming.left -= available;
  if (incoming.left == 0) finish_frame(connection);
}

void TcpTransport::answer_read(Connection& connection, const FrameHeader& request) noexcept {
  FrameHeader response;
  response.kind = FrameKind::read_response;
  response.operation = request.operation;
  const void* source = nullptr;
  if (registrar_.allows(request.key, request.address, request.length, Access::remote_read)) {
    response.length = request.length;
    source = reinterpret_cast<const void*>(request.address);
  } else {
    response.status = FrameStatus::bad_key;
  }
  queue_answer(connection, response, source);
}

// A hello must carry an address and quote this endpoint's token.
void TcpTransport::take_hello_frame(Connection& connection) noexcept {
  if (connection.hello.from.magic != kAddressMagic) return close_connection(connection, "a hello without an address");
  if (connection.hello.your_token != address_.token) {
    log::warn("transport", "tcp-own: {} connected with a hello that does not quote this endpoint's token: not a "
              "rank of this job (it never read this address from the job's PMIx server); closed",
              remote_of(connection.fd));
    return close_connection(connection, "a hello without this endpoint's token");
  }
  connection.said_hello = true;
  take_hello(connection);
}

// The current frame's payload is all in: complete what it finishes and answer it.
void TcpTransport::finish_frame(Connection& connection) noexcept {
  IncomingFrame& incoming = connection.incoming;
  incoming.active = false;
  const FrameHeader& header = incoming.header;
  try {
    switch (header.kind) {
      case FrameKind::hello:
        take_hello_frame(connection);
        break;
      case FrameKind::hello_reply:
        take_hello_reply(connection, header.status);
        break;
      case FrameKind::message:
        complete(CompletionKind::receive, connection.peer, incoming.context, incoming.target, incoming.room);
        break;
      case FrameKind::write: {
        if (header.status == FrameStatus::ok && (header.flags & kFlagNotification) != 0)
          complete(CompletionKind::remote_write, connection.peer, 0, incoming.target, header.length, header.notification);
        FrameHeader ack;
        ack.kind = FrameKind::write_ack;
        ack.operation = header.operation;
        ack.status = header.status;
        queue_answer(connection, ack, nullptr);
        break;
      }
      case FrameKind::read_request:
        answer_read(connection, header);
        break;
      case FrameKind::read_response:
      case FrameKind::write_ack:
        complete_rma(connection, header);
        break;
    }
  } catch (const std::bad_alloc&) {
    log::error("transport", "tcp-own: no memory to complete a frame of kind {}", static_cast<unsigned>(header.kind));
  }
}

// A peer's answer completes the write or read it names; an answer to nothing we asked
// of that peer closes the connection.
void TcpTransport::complete_rma(Connection& connection, const FrameHeader& answer) {
  if (connection.state == LinkState::draining) return;  // lose_peer failed what it answers
  PendingOperation* operation = find_pending(answer.operation);
  CompletionKind expected = answer.kind == FrameKind::write_ack ? CompletionKind::write_done : CompletionKind::read_done;
  if (operation == nullptr || operation->kind != expected || operation->peer != connection.peer)
    return close_connection(connection, "an answer to no operation of ours");
  if (answer.status != FrameStatus::ok)
    complete_error(expected, Errc::invalid_argument, operation->peer, operation->context,
                   "the peer refused the RMA: its key does not cover the range");
  else if (expected == CompletionKind::read_done && answer.length != operation->length)
    complete_error(expected, Errc::transport, operation->peer, operation->context,
                   "the peer answered a read with a different length");
  else
    complete(expected, operation->peer, operation->context, operation->buffer, operation->length);
  retire_pending(*operation);
}

// Takes every whole frame in the input buffer, and the buffered part of the next.
void TcpTransport::take_buffered(Connection& connection) noexcept {
  IncomingFrame& incoming = connection.incoming;
  while (connection.fd >= 0 || connection.state == LinkState::draining) {
    if (!incoming.active && !take_header(connection)) break;
    if (incoming.active) take_payload(connection);
    if (incoming.active) break;
  }
  bool whole_frame_left = !incoming.active && connection.input_end - connection.input_begin >= sizeof(FrameHeader);
  if (connection.state == LinkState::draining && !whole_frame_left) end_draining(connection);
}

// Takes the frames buffered, then reads more; stops when the socket is drained, the input
// is full (back-pressure) or the connection closed.
void TcpTransport::receive_from(Connection& connection) noexcept {
  if (connection.dialing) return;  // finish_dial() names a failed connect better than recv
  for (;;) {
    IncomingFrame& incoming = connection.incoming;
    take_buffered(connection);
    if (connection.fd < 0) return;
    std::byte* into = nullptr;
    std::size_t room = 0;
    bool direct = incoming.active && connection.input_begin == connection.input_end && incoming.left >= kDirectBytes &&
                  incoming.taken < incoming.room;
    if (direct) {
      into = incoming.target + incoming.taken;
      room = std::min(incoming.left, incoming.room - incoming.taken);
    } else {
      if (connection.input_begin > 0) {
        std::memmove(connection.input.get(), connection.input.get() + connection.input_begin,
                     connection.input_end - connection.input_begin);
        connection.input_end -= connection.input_begin;
        connection.input_begin = 0;
      }
      into = connection.input.get() + connection.input_end;
      room = connection.input_capacity - connection.input_end;
      if (room == 0) return;  // a message waits for a receive; the sender's socket fills
    }
    ssize_t got = ::recv(connection.fd, into, room, MSG_DONTWAIT);
    if (got == 0) return end_of_stream(connection, "the peer closed the connection");
    if (got < 0) {
      if (would_block(errno)) return;
      log::warn("transport", "tcp-own: recv from peer {}: {}", connection.peer, std::strerror(errno));
      return end_of_stream(connection, "receiving on the connection failed");
    }
    auto received = static_cast<std::size_t>(got);
    if (direct) {
      incoming.taken += received;
      incoming.left -= received;
      if (incoming.left == 0) finish_frame(connection);
    } else {
      connection.input_end += received;
    }
    if (received < room) {  // drained: take what came and stop
      take_buffered(connection);
      return;
    }
  }
}

// With few connections, a recv on each is cheapest; past kDirectPollLimit one epoll_wait
// names the sockets that hold data (and the listening one), so a poll costs one system
// call plus one per socket with something to take.
void TcpTransport::receive_ready() noexcept {
  if (connections_.size() <= kDirectPollLimit) {
    if (++polls_ % kAcceptEveryPolls == 0) accept_new();
    for (std::size_t i = 0; i < connections_.size(); ++i) {
      Connection& connection = *connections_[i];
      if (connection.fd >= 0) receive_from(connection);
      else if (connection.state == LinkState::draining) take_buffered(connection);
    }
    return;
  }
  for (std::size_t i = 0; i < connections_.size(); ++i) {  // frames that waited for a receive: no event says so
    Connection& connection = *connections_[i];
    bool takes = connection.fd >= 0 || connection.state == LinkState::draining;
    if (takes && connection.input_end > connection.input_begin) take_buffered(connection);
  }
  epoll_event events[kEventsPerPoll];
  int ready = ::epoll_wait(epoll_fd_, events, kEventsPerPoll, 0);
  for (int i = 0; i < ready; ++i) {
    auto* connection = static_cast<Connection*>(events[i].data.ptr);
    if (connection == nullptr) accept_new();
    else if (connection->fd >= 0) receive_from(*connection);
  }
}

// Receives first, then sends what is queued, the answers to what just arrived among it:
// an answer must not wait for a later poll, which a peer computing for a while would not
// make (its writer would stall until then).
std::size_t TcpTransport::poll(std::span<Completion> out) noexcept {
  if (dialing_ > 0) finish_dials();
  receive_ready();
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    Connection& connection = *connections_[i];
    if (connection.fd >= 0 && !connection.output.empty()) flush(connection);
  }
  if (closed_any_) {
    closed_any_ = false;
    std::erase_if(connections_,
                  [](const auto& connection) { return connection->fd < 0 && connection->state == LinkState::open; });
  }
  std::size_t count = 0;
  while (count < out.size() && !completions_.empty()) {
    out[count++] = completions_.front();
    completions_.pop_front();
  }
  return count;
}

}  // namespace tether::transport::tcp
