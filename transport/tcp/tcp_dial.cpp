// Dialling a peer: the first frame to it opens a connection without blocking. connect()
// runs in the background while frames queue behind the hello; each poll() looks at the
// connections still dialling, sends the hello once one is up, and fails everything owed
// to the peer when the connect fails or TETHER_TCP_CONNECT_TIMEOUT passes (an unreachable
// host would otherwise cost the kernel's SYN retries, about two minutes).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/log.hpp"
#include "transport/tcp/tcp_socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace tether::transport::tcp {
namespace {

// Starts connecting `fd` (non-blocking) to `target`: connected or in progress. false with
// errno set, and the socket closed, when it failed at once.
bool start_connect(int fd, const WireAddress& target) {
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_addr.s_addr = target.ipv4;
  remote.sin_port = target.port;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0 || errno == EINPROGRESS) return true;
  int error = errno;
  ::close(fd);
  errno = error;
  return false;
}

// The hello into a fresh socket, which always has room for it; false with errno set.
bool send_hello(int fd, const WireAddress& self, const WireAddress& target) {
  FrameHeader header;
  header.kind = FrameKind::hello;
  header.length = sizeof(Hello);
  Hello hello{self, target.token};
  hello.from.token = 0;
  std::byte greeting[sizeof header + sizeof hello];
  std::memcpy(greeting, &header, sizeof header);
  std::memcpy(greeting + sizeof header, &hello, sizeof hello);
  ssize_t sent = ::send(fd, greeting, sizeof greeting, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent == static_cast<ssize_t>(sizeof greeting)) return true;
  if (sent >= 0) errno = EMSGSIZE;
  return false;
}

constexpr const char* kUnreachableRemedy =
    "the peer must be alive and reachable on its TETHER_TCP_INTERFACE (check routes and firewalls)";
constexpr const char* kTimedOutRemedy =
    "the peer's host may be down or cut off: check routes and firewalls, or raise TETHER_TCP_CONNECT_TIMEOUT";

// Errors of socket() or an immediate connect() that say this host ran short, not the peer.
bool is_local_shortage(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM || error == EADDRNOTAVAIL ||
         error == EAGAIN;
}

}  // namespace

std::string TcpTransport::describe(PeerIndex peer) const {
  const WireAddress& address = peers_[peer].address;
  return fmt::format("{}:{} (process {})", dotted(address.ipv4), ntohs(address.port), address.pid);
}

// The connection frames to `peer` go on, opened on first use; nullptr after fail().
Connection* TcpTransport::connection_to(PeerIndex peer) noexcept {
  if (peer >= peers_.size()) {
    (void)fail(Errc::invalid_argument, fmt::format("peer {} was never inserted ({} peers)", peer, peers_.size()),
               "insert the peer's address with insert_peer first");
    return nullptr;
  }
  TcpPeer& target = peers_[peer];
  if (target.connection != nullptr) return target.connection;
  if (target.dead) {
    (void)fail(Errc::peer_unreachable, fmt::format("the connection to {} was lost", describe(peer)),
               "stop sending to that peer");
    return nullptr;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    set_buffers(fd, socket_buffer_bytes_);
    set_no_delay(fd);
    choose_congestion(fd, target.address.ipv4);  // before connect: the algorithm's set-up runs once
  }
  if (fd < 0 || !start_connect(fd, target.address)) {
    int error = errno;
    if (is_local_shortage(error)) return fail_for_local_shortage(peer, error);  // the peer may be fine
    target.dead = true;  // it listened before it published the address: it is gone
    return fail_connect(peer, error);
  }
  Connection* connection = adopt(fd, LinkState::awaiting_reply, false);
  if (connection == nullptr) {
    (void)fail(Errc::out_of_memory, "no memory, or no file descriptor for epoll, for a new connection",
               fmt::format("raise ulimit -n if the process holds many sockets; else {}", kOutOfMemoryRemedy));
    return nullptr;
  }
  connection->peer = peer;
  connection->dialing = true;
  connection->dial_started = std::chrono::steady_clock::now();
  ++dialing_;
  target.connection = connection;
  if (int error = finish_dial(*connection); error != 0) return fail_connect(peer, error);  // lo: often over already
  return connection;
}

// A dial that failed for want of something on this host (descriptors, local ports,
// buffers): the call fails, the peer stays alive to be dialled again.
Connection* TcpTransport::fail_for_local_shortage(PeerIndex peer, int error) noexcept {
  (void)fail(Errc::out_of_memory, fmt::format("connect to {}: {} (on this host)", describe(peer), std::strerror(error)),
             "raise ulimit -n, or close sockets this process no longer needs, then send again", error);
  return nullptr;
}

// The caller's error for a connect that failed while it waited; nullptr.
Connection* TcpTransport::fail_connect(PeerIndex peer, int error) noexcept {
  (void)fail(Errc::peer_unreachable, fmt::format("connect to {}: {}", describe(peer), std::strerror(error)),
             error == ETIMEDOUT ? kTimedOutRemedy : kUnreachableRemedy, error);
  return nullptr;
}

// Each connection still dialling: connected, failed or timed out yet? (Dialling only
// happens while a pair's first frames wait, so one poll() per such socket is cheap.)
void TcpTransport::finish_dials() noexcept {
  for (std::size_t i = 0; i < connections_.size() && dialing_ > 0; ++i)
    if (connections_[i]->dialing) (void)finish_dial(*connections_[i]);
}

// Once the socket is writable the connect is over: say hello, or fail what the peer is
// owed. The errno that ended the connect, or 0 (connected, or still under way).
int TcpTransport::finish_dial(Connection& connection) noexcept {
  pollfd writable{connection.fd, POLLOUT, 0};
  if (::poll(&writable, 1, 0) <= 0) {
    if (!dial_timed_out(connection)) return 0;
    dial_failed(connection, ETIMEDOUT, true);
    return ETIMEDOUT;
  }
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  if (error == 0 && !send_hello(connection.fd, address_, peers_[connection.peer].address)) error = errno;
  if (error != 0) {
    dial_failed(connection, error, false);
    return error;
  }
  connection.dialing = false;
  --dialing_;
  return 0;
}

// TETHER_TCP_CONNECT_TIMEOUT passed (0s: never; the kernel's SYN retries end it).
bool TcpTransport::dial_timed_out(const Connection& connection) const noexcept {
  return connect_timeout_.count() > 0 && std::chrono::steady_clock::now() - connection.dial_started > connect_timeout_;
}

// The peer is gone (it listened before it published its address) or out of reach: the
// log names the system's reason, the completions of what it was owed static text.
void TcpTransport::dial_failed(Connection& connection, int error, bool timed_out) noexcept {
  log::warn("transport", "tcp-own: connect to {}: {}; {}", describe(connection.peer), std::strerror(error),
            timed_out ? kTimedOutRemedy : kUnreachableRemedy);
  shut(connection, LinkState::open);
  lose_peer(connection, timed_out ? "the connection to the peer did not open within TETHER_TCP_CONNECT_TIMEOUT"
                                  : "the connection to the peer could not be opened (the log says why)");
}

}  // namespace tether::transport::tcp
