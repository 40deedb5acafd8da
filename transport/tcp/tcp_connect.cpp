// Opening: the listening socket and the address peers need; connections made on first
// use and accepted while polling; the registrar's key table.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "transport/tcp/tcp_socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace tether::transport::tcp {
namespace {

constexpr std::size_t kInjectBytes = 16 * 1024;
constexpr std::size_t kQueueDepth = 4096;

struct ListenAddress {
  std::uint32_t ipv4 = 0;  // network byte order
  std::string label;       // the interface's name, or the address as given
};

// The IPv4 address to listen on: `wanted` as an address, an interface's name, or "auto"
// (the first interface that is up and not loopback, else loopback).
Expected<ListenAddress> choose_address(const std::string& wanted) {
  in_addr parsed{};
  if (wanted != "auto" && ::inet_pton(AF_INET, wanted.c_str(), &parsed) == 1) return ListenAddress{parsed.s_addr, wanted};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return make_error(Errc::transport, fmt::format("getifaddrs: {}", std::strerror(errno)),
                      "set TETHER_TCP_INTERFACE to an IPv4 address", errno);
  std::optional<ListenAddress> chosen;
  std::string seen;
  for (ifaddrs* entry = list; entry != nullptr && !chosen; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET || (entry->ifa_flags & IFF_UP) == 0) continue;
    std::uint32_t ipv4 = reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr.s_addr;
    seen += fmt::format("{}{} ({})", seen.empty() ? "" : ", ", entry->ifa_name, dotted(ipv4));
    bool loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0;
    if (wanted == "auto" ? !loopback : wanted == entry->ifa_name) chosen = ListenAddress{ipv4, entry->ifa_name};
  }
  ::freeifaddrs(list);
  if (chosen) return *chosen;
  if (wanted == "auto") return ListenAddress{htonl(INADDR_LOOPBACK), "lo"};
  return make_error(Errc::invalid_argument, fmt::format("no IPv4 interface named {} is up (up: {})", wanted, seen),
                    "set TETHER_TCP_INTERFACE to one of those names, an IPv4 address, or auto");
}

// 64 bits of the system's entropy, never 0.
std::uint64_t random_token() {
  std::random_device entropy;
  std::uint64_t token = 0;
  while (token == 0) token = static_cast<std::uint64_t>(entropy()) << 32 | entropy();
  return token;
}

std::uint64_t next_instance() {
  static std::atomic<std::uint64_t> counter{0};
  auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return now ^ (counter.fetch_add(1) << 48);
}

// The setting, or `auto` (with a warning) when it cannot be an algorithm's name.
std::string congestion_setting(std::string_view setting) {
  constexpr std::size_t kLongestName = 15;  // the kernel's TCP_CA_NAME_MAX, less the NUL
  if (!setting.empty() && setting.size() <= kLongestName) return std::string(setting);
  log::warn("transport", "tcp-own: TETHER_TCP_CONGESTION='{}' is not an algorithm's name (1-{} characters); using "
            "auto. Set auto, system or a name from /proc/sys/net/ipv4/tcp_available_congestion_control",
            setting, kLongestName);
  return "auto";
}

// The kernel caps SO_SNDBUF and SO_RCVBUF at net.core.wmem_max and rmem_max (208 KiB on
// stock kernels): say so once, with the fix, when TETHER_TCP_SOCKET_BUFFER was cut.
void note_capped_buffers(int fd, int requested) {
  static std::atomic<bool> noted{false};
  int granted = 0;
  socklen_t length = sizeof granted;
  if (requested <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &length) != 0) return;
  if (granted >= 2 * static_cast<std::int64_t>(requested) || noted.exchange(true)) return;
  auto asked = static_cast<std::uint64_t>(requested);
  log::info("transport", "tcp-own: the kernel gave socket buffers of {} where TETHER_TCP_SOCKET_BUFFER={} asks {} "
            "(it doubles the request, capped at net.core.wmem_max and rmem_max): raise those (sysctl) so a large "
            "message leaves in one sendmsg", config::format_size(static_cast<std::uint64_t>(granted)),
            config::format_size(asked), config::format_size(2 * asked));
}

}  // namespace

// Seeded from 256 bits of the system's entropy: one key does not give away the others.
std::mt19937_64 TcpRegistrar::seeded() {
  std::random_device entropy;
  std::seed_seq seed{entropy(), entropy(), entropy(), entropy(), entropy(), entropy(), entropy(), entropy()};
  return std::mt19937_64(seed);
}

Expected<Registration> TcpRegistrar::register_range(void* address, std::size_t length, Access access) {
  std::unique_lock lock(mutex_);
  std::uint64_t key = 0;
  while (key == 0 || ranges_.count(key) != 0) key = random_keys_();
  ranges_[key] = Range{reinterpret_cast<std::uint64_t>(address), length, access};
  Registration registration;
  registration.address = address;
  registration.length = length;
  registration.remote_key = key;
  return registration;
}

void TcpRegistrar::deregister(const Registration& registration) noexcept {
  std::unique_lock lock(mutex_);
  ranges_.erase(registration.remote_key);
}

bool TcpRegistrar::allows(std::uint64_t key, std::uint64_t address, std::uint64_t length, Access access) const {
  std::shared_lock lock(mutex_);
  auto found = ranges_.find(key);
  if (found == ranges_.end()) return false;
  const Range& range = found->second;
  bool granted = (static_cast<std::uint32_t>(range.access) & static_cast<std::uint32_t>(access)) != 0;
  return granted && address >= range.address && address - range.address <= range.length &&
         length <= range.length - (address - range.address);
}

Expected<std::unique_ptr<Transport>> TcpTransport::open(const std::string& interface) {
  std::unique_ptr<TcpTransport> transport(new TcpTransport());
  const auto& config = config::Config::global();
  std::string wanted = interface.empty() ? std::string(config.text("TETHER_TCP_INTERFACE")) : interface;
  transport->connect_timeout_ = config.duration("TETHER_TCP_CONNECT_TIMEOUT");
  transport->socket_buffer_bytes_ = static_cast<int>(std::min<std::uint64_t>(config.size_bytes("TETHER_TCP_SOCKET_BUFFER"), 1U << 30));
  transport->congestion_ = congestion_setting(config.text("TETHER_TCP_CONGESTION"));
  if (auto listening = transport->listen_on(wanted); !listening) return tl::unexpected(listening.error());
  Limits& limits = transport->limits_;
  limits.max_message_bytes = std::size_t{1} << 40;
  limits.max_rma_bytes = 0;  // no limit
  limits.inject_bytes = kInjectBytes;
  limits.send_queue_depth = kQueueDepth;
  limits.receive_queue_depth = kQueueDepth;
  log::info("transport", "opened {}: listening on {}:{}", transport->name_, dotted(transport->address_.ipv4),
            ntohs(transport->address_.port));
  return std::unique_ptr<Transport>(std::move(transport));
}

Expected<void> TcpTransport::listen_on(const std::string& interface) {
  auto chosen = choose_address(interface);
  if (!chosen) return tl::unexpected(chosen.error());
  name_ = "tcp-own:" + chosen->label;
  const std::uint32_t ipv4 = chosen->ipv4;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  set_buffers(listen_fd_, socket_buffer_bytes_);
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = ipv4;
  socklen_t bound_length = sizeof bound;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&bound), sizeof bound) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0)
    return make_error(Errc::transport, fmt::format("listening on {}: {}", dotted(ipv4), std::strerror(errno)),
                      "set TETHER_TCP_INTERFACE to an interface of this host that is up", errno);
  if (loopback(ipv4)) choose_congestion(listen_fd_, ipv4);  // all peers local: accepted sockets inherit it
  note_capped_buffers(listen_fd_, socket_buffer_bytes_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event listening{EPOLLIN, {.ptr = nullptr}};
  if (epoll_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &listening) != 0)
    return make_error(Errc::transport, fmt::format("epoll for the listening socket: {}", std::strerror(errno)),
                      "raise the open-files limit (ulimit -n)", errno);
  address_.port = bound.sin_port;
  address_.ipv4 = ipv4;
  address_.pid = static_cast<std::uint32_t>(::getpid());
  address_.instance = next_instance();
  address_.token = random_token();
  return {};
}

TcpTransport::~TcpTransport() {
  detach_pool();
  for (auto& connection : connections_)
    if (connection->fd >= 0) ::close(connection->fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

std::span<const std::byte> TcpTransport::address() const noexcept {
  return {reinterpret_cast<const std::byte*>(&address_), sizeof address_};
}

Expected<PeerIndex> TcpTransport::insert_peer(std::span<const std::byte> address) {
  WireAddress wire{};
  if (address.size() != sizeof wire)
    return make_error(Errc::invalid_argument, fmt::format("a {}-byte tcp-own address (expected {})", address.size(), sizeof wire),
                      "every rank of a job must use the same network transport (TETHER_NET_TRANSPORT)");
  std::memcpy(&wire, address.data(), sizeof wire);
  if (wire.magic != kAddressMagic || wire.version != kWireVersion || wire.port == 0)
    return make_error(Errc::invalid_argument,
                      fmt::format("a tcp-own address of version {} (this build speaks {})", wire.version, kWireVersion),
                      "run the same tether build on every rank");
  peers_.push_back(TcpPeer{wire, nullptr, false});
  auto peer = static_cast<PeerIndex>(peers_.size() - 1);
  // A connection the peer opened before we knew it becomes ours to it too.
  for (auto& connection : connections_) {
    resolve(*connection);
    bool from_it = connection->peer == peer && connection->said_hello && connection->fd >= 0;
    if (from_it && wire != address_ && peers_[peer].connection == nullptr) peers_[peer].connection = connection.get();
  }
  return peer;
}

// Takes over `fd` (closed on failure); nullptr when there is no memory or epoll refuses it.
Connection* TcpTransport::adopt(int fd, LinkState state, bool accepted) noexcept {
  try {
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->state = state;
    connection->accepted = accepted;
    connection->input = std::make_unique<std::byte[]>(kInputBufferBytes);
    connections_.reserve(connections_.size() + 1);
    epoll_event readable{EPOLLIN, {.ptr = connection.get()}};
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &readable) != 0) {
      log::error("transport", "tcp-own: epoll_ctl: {}; connection refused", std::strerror(errno));
      ::close(fd);
      return nullptr;
    }
    connections_.push_back(std::move(connection));
    return connections_.back().get();
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return nullptr;
  }
}

void TcpTransport::accept_new() noexcept {
  for (;;) {
    sockaddr_in remote{};
    socklen_t length = sizeof remote;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&remote), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    set_no_delay(fd);
    choose_congestion(fd, remote.sin_addr.s_addr);
    if (adopt(fd, LinkState::open, true) == nullptr) return;
  }
}

// TETHER_TCP_CONGESTION: `auto` gives a connection to this host reno, where BBR's pacing
// only slowed the kernel's copies (transport/tcp/README.md); other hosts keep the system's
// algorithm, as under `system`; a name applies everywhere. A refusal is logged once and
// the connection keeps the system's.
void TcpTransport::choose_congestion(int fd, std::uint32_t remote_ipv4) noexcept {
  std::string_view name = congestion_;
  if (name == "system") return;
  if (name == "auto") {
    if (!same_host(remote_ipv4, address_.ipv4)) return;
    name = "reno";
  }
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return;
  if (std::exchange(congestion_refused_, true)) return;
  int error = errno;
  log::warn("transport",
            "tcp-own: TETHER_TCP_CONGESTION={}: the kernel refused {} ({}); connections keep the system's algorithm. "
            "Pick one of /proc/sys/net/ipv4/tcp_{}_congestion_control, or set TETHER_TCP_CONGESTION=system",
            congestion_, name, std::strerror(error), error == EPERM ? "allowed" : "available");
}

// An accepted connection learns its peer index from the hello's address, once inserted.
void TcpTransport::resolve(Connection& connection) noexcept {
  if (!connection.said_hello || connection.peer != kUnknownPeer) return;
  for (PeerIndex peer = 0; peer < peers_.size(); ++peer)
    if (peers_[peer].address == connection.hello.from) connection.peer = peer;
}

void TcpTransport::reply_to_hello(Connection& connection, FrameStatus status) noexcept {
  FrameHeader reply;
  reply.kind = FrameKind::hello_reply;
  reply.status = status;
  // Past the queue's limit too: the peer's frames wait for this reply.
  if (enqueue(connection, reply, nullptr, 0)) (void)flush(connection);
  else close_connection(connection, "no memory to reply to a hello");
}

// A hello arrived on an accepted connection: it becomes the pair's connection, unless we
// connected to the same peer at once, said hello, and our address is the smaller (ours
// wins, and the peer moves its frames onto it when our hello reaches it). Ours still
// dialling gives way: the peer's works already.
void TcpTransport::take_hello(Connection& connection) noexcept {
  resolve(connection);
  PeerIndex peer = connection.peer;
  if (peer == kUnknownPeer || connection.hello.from == address_) return reply_to_hello(connection, FrameStatus::ok);
  Connection* mine = peers_[peer].connection;
  if (mine != nullptr && mine->state == LinkState::open) return reply_to_hello(connection, FrameStatus::ok);
  if (mine != nullptr && mine->state == LinkState::awaiting_reply && !mine->dialing && address_ < connection.hello.from) {
    reply_to_hello(connection, FrameStatus::rejected);
    return close_connection(connection, "both sides connected; ours is kept");
  }
  reply_to_hello(connection, FrameStatus::ok);
  if (connection.fd < 0) return;
  if (mine != nullptr) {  // ours dials, waits for a reply or was rejected: its frames go on this one, in order
    for (OutgoingFrame& frame : mine->output) connection.output.push_back(std::move(frame));
    connection.output_bytes += mine->output_bytes;
    mine->output.clear();
    mine->output_bytes = 0;
    shut(*mine, LinkState::open);
  }
  peers_[peer].connection = &connection;
  (void)flush(connection);
}

// The peer replied to our hello: send what waited, or wait for its own connection.
void TcpTransport::take_hello_reply(Connection& connection, FrameStatus status) noexcept {
  if (connection.state != LinkState::awaiting_reply) return;
  if (status != FrameStatus::ok) return shut(connection, LinkState::parked);
  connection.state = LinkState::open;
  (void)flush(connection);
}

// Closes the socket (out of the epoll set first: a forked child may hold it open); a
// receive whose message was cut short goes back to the front of the queue. `state`
// parked keeps the frames for the peer's own connection, open lets the end of poll()
// sweep the connection away.
void TcpTransport::shut(Connection& connection, LinkState state) noexcept {
  if (connection.fd >= 0) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection.fd, nullptr);
    ::close(connection.fd);
  }
  connection.fd = -1;
  connection.state = state;
  if (connection.dialing) {
    connection.dialing = false;
    --dialing_;
  }
  closed_any_ = true;
  give_back_cut_receive(connection);
}

// A receive whose message was cut short goes back to the front of the queue.
void TcpTransport::give_back_cut_receive(Connection& connection) noexcept {
  IncomingFrame& incoming = connection.incoming;
  if (!incoming.active || incoming.header.kind != FrameKind::message) return;
  incoming.active = false;
  try {
    receives_.push_front({incoming.target, incoming.receive_length, incoming.context});
  } catch (const std::bad_alloc&) {
    log::error("transport", "tcp-own: no memory to give back a receive; it never completes");
  }
}

// The pair's connection closing fails everything still owed to the peer; an extra one
// owes nothing. One that closes before replying to our hello is taken as a rejection.
void TcpTransport::close_connection(Connection& connection, const char* cause) noexcept {
  if (connection.state == LinkState::draining) return end_draining(connection);
  if (connection.fd < 0) return;
  PeerIndex peer = connection.peer;
  bool pairs = peer != kUnknownPeer && peers_[peer].connection == &connection;
  if (pairs && connection.state == LinkState::awaiting_reply && !connection.dialing)
    return shut(connection, LinkState::parked);
  shut(connection, LinkState::open);
  if (!pairs) return log::info("transport", "tcp-own: closed a connection no peer uses: {}", cause);
  log::warn("transport", "tcp-own: connection to peer {} closed: {}", peer, cause);
  lose_peer(connection, cause);
}

// The pair's (shut) connection is gone for good: the peer is dead, and every frame still
// queued on it and every RMA it owes fail with `cause` (static text).
void TcpTransport::lose_peer(Connection& connection, const char* cause) noexcept {
  PeerIndex peer = connection.peer;
  peers_[peer].connection = nullptr;
  peers_[peer].dead = true;
  for (const OutgoingFrame& frame : connection.output)
    if (frame.completes_send) complete_error(CompletionKind::send_done, Errc::peer_unreachable, peer, frame.context, cause);
  connection.output.clear();
  connection.output_bytes = 0;
  for (PendingOperation& operation : pending_) {
    if (!operation.live || operation.peer != peer) continue;
    complete_error(operation.kind, Errc::peer_unreachable, peer, operation.context, cause);
    retire_pending(operation);
  }
}

// The peer closed its end (or reset it): whole frames it sent before, still waiting in
// the input buffer for receives, are handed out as receives come, as shm-own's ring
// outlives its peer; nothing more goes to it. A frame cut short is dropped.
void TcpTransport::end_of_stream(Connection& connection, const char* cause) noexcept {
  if (connection.fd >= 0 && connection.state == LinkState::open) {
    read_what_is_left(connection);
    take_buffered(connection);
    if (connection.fd < 0) return;  // a broken frame among them closed it
  }
  PeerIndex peer = connection.peer;
  bool pairs = peer != kUnknownPeer && peers_[peer].connection == &connection && connection.state == LinkState::open;
  bool whole_frame_waits =
      !connection.incoming.active && connection.input_end - connection.input_begin >= sizeof(FrameHeader);
  if (!pairs || !whole_frame_waits) return close_connection(connection, cause);
  shut(connection, LinkState::draining);
  log::warn("transport", "tcp-own: connection to peer {} closed: {}; what it sent before is still received", peer,
            cause);
  lose_peer(connection, cause);
}

// Every byte the peer sent that this side has not read moves into the input buffer, grown
// up to kMostDrainedBytes: a send that failed, or a full buffer, leaves some in the socket.
void TcpTransport::read_what_is_left(Connection& connection) noexcept {
  for (;;) {
    if (connection.input_end == connection.input_capacity) {
      if (connection.input_capacity >= kMostDrainedBytes) return;
      std::size_t grown = connection.input_capacity * 2;
      auto larger = std::unique_ptr<std::byte[]>(new (std::nothrow) std::byte[grown]);
      if (larger == nullptr) return;
      std::memcpy(larger.get(), connection.input.get(), connection.input_end);
      connection.input = std::move(larger);
      connection.input_capacity = grown;
    }
    ssize_t got = ::recv(connection.fd, connection.input.get() + connection.input_end,
                         connection.input_capacity - connection.input_end, MSG_DONTWAIT);
    if (got <= 0) return;
    connection.input_end += static_cast<std::size_t>(got);
  }
}

// A draining connection holds no whole frame any more: it goes at the end of poll().
void TcpTransport::end_draining(Connection& connection) noexcept {
  give_back_cut_receive(connection);
  connection.state = LinkState::open;
  closed_any_ = true;
}

}  // namespace tether::transport::tcp
