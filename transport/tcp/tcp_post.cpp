// Posting: every operation is one frame on our connection to the peer, sent at once when
// the socket takes it, else queued and flushed by poll(). Writes and reads wait for the
// peer's answer (write_ack, read_response) under an operation id.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/base/log.hpp"
#include "transport/tcp/copy_failure_injection.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace tether::transport::tcp {
namespace {

constexpr std::size_t kMostIovecs = 64;

std::size_t frame_bytes(const OutgoingFrame& frame) noexcept {
  return sizeof(FrameHeader) + payload_on_wire(frame.header);
}

// Adds the unsent parts of `frame` to `vectors`.
void gather(const OutgoingFrame& frame, iovec* vectors, std::size_t& count) noexcept {
  if (frame.sent < sizeof(FrameHeader))
    vectors[count++] = {const_cast<std::byte*>(reinterpret_cast<const std::byte*>(&frame.header) + frame.sent),
                        sizeof(FrameHeader) - frame.sent};
  if (frame.payload == nullptr || frame.header.length == 0) return;
  std::size_t payload_sent = frame.sent > sizeof(FrameHeader) ? frame.sent - sizeof(FrameHeader) : 0;
  vectors[count++] = {const_cast<std::byte*>(frame.payload + payload_sent), frame.header.length - payload_sent};
}

}  // namespace

// Sends what the socket takes now. false: the connection broke and was closed.
bool TcpTransport::holds_unsent() const noexcept {
  return std::any_of(connections_.begin(), connections_.end(),
                     [](const std::unique_ptr<Connection>& connection) { return connection && !connection->output.empty(); });
}

bool TcpTransport::flush(Connection& connection) noexcept {
  if (connection.state != LinkState::open) return true;  // frames wait for the peer's answer
  while (!connection.output.empty()) {
    iovec vectors[kMostIovecs];
    std::size_t count = 0;
    for (std::size_t i = 0; i < connection.output.size() && count + 2 <= kMostIovecs; ++i)
      gather(connection.output[i], vectors, count);
    msghdr message{};
    message.msg_iov = vectors;
    message.msg_iovlen = count;
    ssize_t sent = ::sendmsg(connection.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (would_block(errno)) return true;
      log::warn("transport", "tcp-own: sendmsg to peer {}: {}", connection.peer, std::strerror(errno));
      end_of_stream(connection, "sending on the connection failed");
      return false;
    }
    auto left = static_cast<std::size_t>(sent);
    connection.output_bytes -= left;
    while (!connection.output.empty()) {
      OutgoingFrame& frame = connection.output.front();
      std::size_t step = std::min(left, frame_bytes(frame) - frame.sent);
      frame.sent += step;
      left -= step;
      if (frame.sent < frame_bytes(frame)) break;
      if (frame.completes_send)
        complete(CompletionKind::send_done, connection.peer, frame.context, const_cast<std::byte*>(frame.payload),
                 frame.header.length);
      connection.output.pop_front();
    }
  }
  return true;
}

// Puts a frame behind the connection's others, `sent` bytes of it gone already. false: no memory.
bool TcpTransport::enqueue(Connection& connection, const FrameHeader& header, const void* payload,
                           std::uint64_t context, std::size_t sent) noexcept {
  try {
    OutgoingFrame& frame = connection.output.emplace_back();
    frame.header = header;
    frame.payload = payload_on_wire(header) > 0 ? static_cast<const std::byte*>(payload) : nullptr;
    frame.context = context;
    frame.sent = sent;
    connection.output_bytes += frame_bytes(frame) - sent;
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

// One sendmsg of a frame on an idle connection: the bytes the socket took, or SIZE_MAX
// when the connection broke (and was closed).
std::size_t TcpTransport::send_now(Connection& connection, const FrameHeader& header, const void* payload) noexcept {
  iovec vectors[2] = {{const_cast<FrameHeader*>(&header), sizeof header},
                      {const_cast<void*>(payload), payload_on_wire(header)}};
  msghdr message{};
  message.msg_iov = vectors;
  message.msg_iovlen = vectors[1].iov_len > 0 ? 2 : 1;
  ssize_t sent = ::sendmsg(connection.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (would_block(errno)) return 0;
  log::warn("transport", "tcp-own: sendmsg to peer {}: {}", connection.peer, std::strerror(errno));
  end_of_stream(connection, "sending on the connection failed");
  return SIZE_MAX;
}

// An answer (write_ack, read_response) leaves at the end of the poll that took its
// request, with every other answer of that poll in one sendmsg.
void TcpTransport::queue_answer(Connection& connection, const FrameHeader& header, const void* payload) noexcept {
  if (connection.state == LinkState::draining) return;  // the peer that asked is gone
  if (!enqueue(connection, header, payload, 0)) close_connection(connection, "no memory to answer an RMA");
}

// Sends a frame at once when the connection is idle, else queues it behind the others
// and sends what the socket takes. `keep` says what happens to a payload that did not
// leave at once: copied (the call is done), referenced until sent (a send_done follows:
// posted), or referenced until the peer answers.
Status TcpTransport::queue_frame(Connection& connection, const FrameHeader& header, const void* payload, Keep keep,
                                 std::uint64_t context) noexcept {
  if (connection.output_bytes > kMostQueuedBytes) return Status::retry;
  bool idle = connection.output.empty() && connection.state == LinkState::open;
  std::size_t sent = 0;
  if (idle) {
    sent = send_now(connection, header, payload);
    if (sent == SIZE_MAX)
      return fail(Errc::peer_unreachable, fmt::format("the connection to peer {} broke", connection.peer),
                  "stop sending to that peer");
    if (sent == sizeof header + payload_on_wire(header)) return Status::done;
  }
  if (!enqueue(connection, header, payload, context, sent)) {
    if (sent == 0) return Status::retry;
    return close_half_sent(connection, "no memory to queue the rest of a frame");
  }
  Status status = keep_unsent(connection.output.back(), keep);
  if (status == Status::retry) return drop_uncopied(connection, sent);
  if (!idle) (void)flush(connection);  // after keep_unsent: the frame may leave (and be popped) now
  return status;
}

// A frame whose payload could not be copied must not keep the caller's buffer (the caller
// reuses it at once): unqueued when none of it left (the caller retries), else the
// connection is closed (half a frame is on the wire).
Status TcpTransport::drop_uncopied(Connection& connection, std::size_t sent) noexcept {
  if (sent == 0) {
    connection.output_bytes -= frame_bytes(connection.output.back());
    connection.output.pop_back();
    return Status::retry;
  }
  return close_half_sent(connection, "no memory to copy the rest of a frame");
}

// Part of a frame left and the rest cannot follow: the stream is broken, so the
// connection closes. `cause` is static text.
Status TcpTransport::close_half_sent(Connection& connection, const char* cause) noexcept {
  PeerIndex peer = connection.peer;
  close_connection(connection, cause);
  return fail(Errc::out_of_memory,
              fmt::format("{} to peer {}: part of it had left, so the connection was closed", cause, peer),
              kOutOfMemoryRemedy);
}

// What the caller's payload becomes once its frame waits in the queue.
Status TcpTransport::keep_unsent(OutgoingFrame& frame, Keep keep) noexcept {
  if (keep == Keep::until_sent) {
    frame.completes_send = true;
    return Status::posted;
  }
  if (keep == Keep::copy && frame.payload != nullptr) {
    if (take_injected_copy_failure()) return Status::retry;
    try {
      frame.owned.assign(frame.payload, frame.payload + frame.header.length);
    } catch (const std::bad_alloc&) {
      return Status::retry;  // the caller's buffer cannot be kept: see drop_uncopied
    }
    frame.payload = frame.owned.data();
  }
  return Status::done;
}

std::uint64_t TcpTransport::add_pending(const PendingOperation& operation) {
  std::uint32_t index = 0;
  if (free_pending_.empty()) {
    index = static_cast<std::uint32_t>(pending_.size());
    pending_.push_back(operation);
  } else {
    index = free_pending_.back();
    free_pending_.pop_back();
    std::uint32_t generation = pending_[index].generation;
    pending_[index] = operation;
    pending_[index].generation = generation;
  }
  pending_[index].live = true;
  return static_cast<std::uint64_t>(pending_[index].generation) << 32 | index;
}

PendingOperation* TcpTransport::find_pending(std::uint64_t operation) noexcept {
  auto index = static_cast<std::uint32_t>(operation);
  if (index >= pending_.size()) return nullptr;
  PendingOperation& found = pending_[index];
  if (!found.live || found.generation != static_cast<std::uint32_t>(operation >> 32)) return nullptr;
  return &found;
}

void TcpTransport::retire_pending(PendingOperation& operation) noexcept {
  operation.live = false;
  ++operation.generation;
  try {
    free_pending_.push_back(static_cast<std::uint32_t>(&operation - pending_.data()));
  } catch (const std::bad_alloc&) {
    // The slot stays unused; ids keep working.
  }
}

Status TcpTransport::post_receive(void* buffer, std::size_t length, void*, std::uint64_t context) noexcept {
  try {
    receives_.push_back({buffer, length, context});
  } catch (const std::bad_alloc&) {
    return Status::retry;
  }
  return Status::posted;
}

Status TcpTransport::send(PeerIndex peer, const void* buffer, std::size_t length, void*, std::uint64_t context) noexcept {
  Connection* connection = connection_to(peer);
  if (connection == nullptr) return Status::error;
  FrameHeader header;
  header.kind = FrameKind::message;
  header.length = length;
  return queue_frame(*connection, header, buffer, length <= limits_.inject_bytes ? Keep::copy : Keep::until_sent, context);
}

// A write or read: a frame whose answer completes it. An error from the socket has
// already failed the operation's completion when the connection closed.
Status TcpTransport::start_rma(PeerIndex peer, FrameHeader& header, const void* buffer, std::size_t length,
                               CompletionKind kind, const RemoteBuffer& remote, std::size_t offset,
                               std::uint64_t context) noexcept {
  if (remote.length != 0 && (offset > remote.length || length > remote.length - offset))
    return fail(Errc::invalid_argument,
                fmt::format("RMA of {} bytes at offset {} runs past the {}-byte remote buffer", length, offset, remote.length),
                "keep RMA inside the RemoteBuffer the peer described");
  Connection* connection = connection_to(peer);
  if (connection == nullptr) return Status::error;
  header.length = length;
  header.address = remote.address + offset;
  header.key = remote.key;
  try {
    header.operation = add_pending(PendingOperation{kind, peer, context, const_cast<void*>(buffer), length, 0, true});
  } catch (const std::bad_alloc&) {
    return Status::retry;
  }
  PendingOperation& operation = pending_[static_cast<std::uint32_t>(header.operation)];
  Status status = queue_frame(*connection, header, buffer, Keep::until_answered, context);
  if (status == Status::done || status == Status::posted) return Status::posted;
  if (!operation.live) return Status::posted;  // the connection broke: its error completion follows
  retire_pending(operation);
  return status;
}

Status TcpTransport::write(PeerIndex peer, const void* buffer, std::size_t length, void*, const RemoteBuffer& target,
                           std::size_t target_offset, std::uint64_t context) noexcept {
  FrameHeader header;
  header.kind = FrameKind::write;
  return start_rma(peer, header, buffer, length, CompletionKind::write_done, target, target_offset, context);
}

Status TcpTransport::write_with_notification(PeerIndex peer, const void* buffer, std::size_t length, void*,
                                             const RemoteBuffer& target, std::size_t target_offset,
                                             std::uint64_t notification, std::uint64_t context) noexcept {
  FrameHeader header;
  header.kind = FrameKind::write;
  header.flags = kFlagNotification;
  header.notification = notification;
  return start_rma(peer, header, buffer, length, CompletionKind::write_done, target, target_offset, context);
}

Status TcpTransport::read(PeerIndex peer, void* buffer, std::size_t length, void*, const RemoteBuffer& source,
                          std::size_t source_offset, std::uint64_t context) noexcept {
  FrameHeader header;
  header.kind = FrameKind::read_request;
  return start_rma(peer, header, buffer, length, CompletionKind::read_done, source, source_offset, context);
}

}  // namespace tether::transport::tcp
