// tcp-own only: a pair that connects at both ends at once keeps one connection and loses
// no frame and no order; hostile bytes on a raw socket (a hello without the target's token,
// guessed keys, a broken header, a message before the hello) are refused at the target,
// corrupt nothing, and close only that connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/base/config.hpp"
#include "tests/transport/transport_support.hpp"
#include "transport/tcp/copy_failure_injection.hpp"
#include "transport/tcp/tcp_socket.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace tether::testing {
namespace {

using transport::tcp::FrameHeader;
using transport::tcp::FrameKind;
using transport::tcp::FrameStatus;
using transport::tcp::Hello;
using transport::tcp::WireAddress;

WireAddress wire_address(std::span<const std::byte> bytes) {
  WireAddress address{};
  if (bytes.size() == sizeof address) std::memcpy(&address, bytes.data(), sizeof address);
  return address;
}

// Established TCP connections of this host whose remote end is one of `ports` (host order).
int established_to(const std::set<unsigned>& ports) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // header
  int count = 0;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    unsigned port = std::stoul(remote.substr(remote.find(':') + 1), nullptr, 16);
    if (state == "01" && ports.count(port) != 0) ++count;
  }
  return count;
}

constexpr int kMessages = 200;

TEST(TcpOwnTest, BothSidesConnectingAtOnceKeepOneConnectionAndEveryFrameInOrder) {
  auto side = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("tcp-own", control);
    ASSERT_TRUE(endpoint.ok());
    std::set<unsigned> ports = {ntohs(wire_address(endpoint->address()).port)};
    control.send_value(*ports.begin());
    ports.insert(static_cast<unsigned>(control.receive_value()));
    std::vector<std::uint32_t> landed(kMessages, 0xffffffffU);
    for (int i = 0; i < kMessages; ++i)
      ASSERT_EQ(endpoint->post_receive(&landed[i], sizeof landed[i], nullptr, i), Status::posted);
    control.barrier();  // neither side has polled: both connect below before either accepts
    for (std::uint32_t i = 0; i < kMessages; ++i)
      ASSERT_NE(endpoint.post([&] { return endpoint->send(endpoint.peer(), &i, sizeof i, nullptr, i); }), Status::error)
          << endpoint->last_error().message();
    for (int i = 0; i < kMessages; ++i) {
      Completion got = endpoint.wait(CompletionKind::receive);
      ASSERT_EQ(got.kind, CompletionKind::receive) << got.cause;
      EXPECT_EQ(got.peer, endpoint.peer());
      EXPECT_EQ(landed[got.context], static_cast<std::uint32_t>(got.context)) << "message " << got.context << " out of order";
    }
    control.send_value(1);
    (void)endpoint.receive_value(control);  // the other side is done too (polling meanwhile)
    EXPECT_EQ(established_to(ports), 1) << "the pair should keep exactly one connection";
    control.barrier();
  };
  auto outcome = run_pair(side, side, std::chrono::seconds(60));
  expect_both_passed(outcome);
}

// A raw TCP client of the victim's endpoint, speaking the wire by hand.
class RawClient {
 public:
  explicit RawClient(const WireAddress& target) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_addr.s_addr = target.ipv4;
    remote.sin_port = target.port;
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0;
  }
  ~RawClient() { ::close(fd_); }
  [[nodiscard]] bool connected() const { return connected_; }
  void send_frame(const FrameHeader& header, const void* payload = nullptr) {
    ASSERT_EQ(::send(fd_, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
    if (payload != nullptr && header.length > 0) {
      ASSERT_EQ(::send(fd_, payload, header.length, 0), static_cast<ssize_t>(header.length));
    }
  }
  // The next frame header; its kind is 0 when the victim closed the connection.
  FrameHeader receive_frame() {
    FrameHeader header{};
    header.kind = static_cast<FrameKind>(0);
    std::size_t got = 0;
    while (got < sizeof header) {
      ssize_t now = ::recv(fd_, reinterpret_cast<char*>(&header) + got, sizeof header - got, 0);
      if (now <= 0) return FrameHeader{0, static_cast<FrameKind>(0)};
      got += static_cast<std::size_t>(now);
    }
    return header;
  }
  // Whether the victim closed the connection: recv sees the end, or a reset (bytes of
  // ours it never read make the close a reset), not the 5 s timeout.
  bool closed_by_peer() {
    char byte;
    ssize_t got = ::recv(fd_, &byte, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A hello from `from` quoting `token` as the target's.
void say_hello(RawClient& raw, const WireAddress& from, std::uint64_t token) {
  FrameHeader header;
  header.kind = FrameKind::hello;
  header.length = sizeof(Hello);
  Hello hello{from, token};
  raw.send_frame(header, &hello);
}

TEST(TcpOwnTest, AHelloWithoutTheTokenOrAWriteWithAForgedKeyIsRefusedAndABrokenFrameClosesOnlyThatConnection) {
  auto victim = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("tcp-own", control);
    ASSERT_TRUE(endpoint.ok());
    char target[16] = "untouched";
    char message[16] = {};
    ASSERT_EQ(endpoint->post_receive(message, sizeof message, nullptr, 7), Status::posted);
    control.send_bytes(endpoint->address());
    control.send_value(reinterpret_cast<std::uint64_t>(target));
    (void)endpoint.receive_value(control);  // polls until the vandal is done with its raw socket
    EXPECT_STREQ(target, "untouched") << "a write with a forged key landed";
    Completion legit = endpoint.wait(CompletionKind::receive);
    ASSERT_EQ(legit.kind, CompletionKind::receive) << legit.cause;
    EXPECT_STREQ(message, "still here");
    control.send_value(1);
  };
  auto vandal = [&](const ControlChannel& control) {
    ConnectedEndpoint endpoint("tcp-own", control);
    ASSERT_TRUE(endpoint.ok());
    WireAddress victim_address = wire_address(endpoint.receive_bytes(control));
    std::uint64_t target = endpoint.receive_value(control);
    WireAddress stranger{};
    stranger.port = htons(1);
    stranger.pid = 1;
    stranger.instance = 42;
    for (std::uint64_t guessed_token : {std::uint64_t{0}, std::uint64_t{1}, victim_address.token ^ 1}) {  // only the job knows the token
      RawClient outsider(victim_address);
      ASSERT_TRUE(outsider.connected());
      say_hello(outsider, stranger, guessed_token);
      EXPECT_TRUE(outsider.closed_by_peer()) << "a hello quoting token " << guessed_token << " was taken";
    }
    // From here on an insider (it read the victim's address, token and all) misbehaves.
    RawClient raw(victim_address);
    ASSERT_TRUE(raw.connected());
    say_hello(raw, stranger, victim_address.token);
    FrameHeader answer = raw.receive_frame();
    EXPECT_EQ(answer.kind, FrameKind::hello_reply);
    EXPECT_EQ(answer.status, FrameStatus::ok);
    for (std::uint64_t guessed_key : {1ULL, 2ULL, 999999ULL}) {  // keys are random: small numbers name nothing
      FrameHeader write;
      write.kind = FrameKind::write;
      write.length = 8;
      write.address = target;
      write.key = guessed_key;
      write.operation = guessed_key;
      raw.send_frame(write, "evilevil");
      FrameHeader ack = raw.receive_frame();
      EXPECT_EQ(ack.kind, FrameKind::write_ack);
      EXPECT_EQ(ack.status, FrameStatus::bad_key) << "key " << guessed_key;
      EXPECT_EQ(ack.operation, guessed_key);
    }
    FrameHeader broken;
    broken.magic = 0xdeadbeef;
    raw.send_frame(broken);
    EXPECT_TRUE(raw.closed_by_peer()) << "a frame with a broken header left the connection open";
    RawClient rude(victim_address);  // skips the hello
    FrameHeader message;
    message.length = 4;
    rude.send_frame(message, "rude");
    EXPECT_TRUE(rude.closed_by_peer()) << "a message before the hello was taken";
    ASSERT_NE(endpoint.post([&] { return endpoint->send(endpoint.peer(), "still here", 11, nullptr, 0); }), Status::error)
        << endpoint->last_error().message();
    control.send_value(0);
    (void)endpoint.receive_value(control);
  };
  auto outcome = run_pair(victim, vandal, std::chrono::seconds(60));
  expect_both_passed(outcome);
}

// A tcp-own endpoint on lo with itself inserted as a peer.
class TcpOwnSelfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = transport::open_transport("tcp-own:lo");
    ASSERT_TRUE(opened) << opened.error().message();
    endpoint_ = std::move(*opened);
    auto self = endpoint_->insert_peer(endpoint_->address());
    ASSERT_TRUE(self) << self.error().message();
    self_ = *self;
  }

  // Sends `text` (up to 7 characters) to itself, the receive posted with `context`, and
  // polls until it arrives (10 s at most): `received` is the receive's completion. Call
  // under ASSERT_NO_FATAL_FAILURE.
  void send_to_self(const char* text, char (&landed)[8], std::uint64_t context, Completion& received) {
    ASSERT_EQ(endpoint_->post_receive(landed, sizeof landed, nullptr, context), Status::posted);
    ASSERT_NE(endpoint_->send(self_, text, std::strlen(text) + 1, nullptr, 0), Status::error)
        << endpoint_->last_error().message();
    Completion completions[4];
    for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
      std::size_t count = endpoint_->poll(completions);
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_NE(completions[i].kind, CompletionKind::error) << completions[i].cause;
        if (completions[i].kind != CompletionKind::receive) continue;
        received = completions[i];
        return;
      }
    }
    FAIL() << "the message to itself did not arrive within 10 s";
  }

  std::unique_ptr<transport::Transport> endpoint_;
  transport::PeerIndex self_ = 0;
};

TEST_F(TcpOwnSelfTest, SendToSelfArrives) {
  char landed[8] = {};
  Completion received{};
  ASSERT_NO_FATAL_FAILURE(send_to_self("mirror", landed, 3, received));
  EXPECT_EQ(received.peer, self_);
  EXPECT_EQ(received.context, 3U);
  EXPECT_STREQ(landed, "mirror");
}

// A dial that fails for want of a descriptor here (socket(): EMFILE) fails that send naming
// this host, and the peer stays alive: once descriptors are free the next send connects.
// Before, the peer was marked lost for good.
TEST_F(TcpOwnSelfTest, ADialShortOfDescriptorsHereLeavesThePeerAlive) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::vector<int> fillers;
  for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) fillers.push_back(fd);
  Status refused = endpoint_->send(self_, "full", 5, nullptr, 0);
  std::string cause = endpoint_->last_error().message();
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(refused, Status::error);
  EXPECT_NE(cause.find("on this host"), std::string::npos) << cause;
  char landed[8] = {};
  Completion received{};
  ASSERT_NO_FATAL_FAILURE(send_to_self("again", landed, 4, received));
  EXPECT_STREQ(landed, "again");
}

// The congestion control TETHER_TCP_CONGESTION should give a connection over lo: auto (and
// what cannot be a name: empty, over 15 characters), reno; system, the system's; a name,
// that one if the kernel lets this process pick it (asked on a spare socket), else the
// system's.
std::string expected_congestion_over_lo() {
  std::string setting(config::Config::global().text("TETHER_TCP_CONGESTION"));
  if (setting.empty() || setting.size() > 15) setting = "auto";
  std::ifstream file("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string system;
  std::getline(file, system);
  if (setting == "auto") return "reno";
  if (setting == "system") return system;
  int spare = ::socket(AF_INET, SOCK_STREAM, 0);
  bool may_pick = ::setsockopt(spare, IPPROTO_TCP, TCP_CONGESTION, setting.data(), setting.size()) == 0;
  ::close(spare);
  return may_pick ? setting : system;
}

// Algorithms of this process's TCP sockets between 127.0.0.1 and 127.0.0.1 at `port`
// (network order) on either end.
std::vector<std::string> congestion_of_connections(std::uint16_t port) {
  std::vector<std::string> algorithms;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(entry.path().filename().string());
    sockaddr_in local{}, remote{};
    socklen_t local_length = sizeof local, remote_length = sizeof remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 || local.sin_family != AF_INET ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0)
      continue;
    bool on_lo = local.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && remote.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
    if (!on_lo || (local.sin_port != port && remote.sin_port != port)) continue;
    char name[32] = {};
    socklen_t length = sizeof name;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) == 0) algorithms.emplace_back(name);
  }
  return algorithms;
}

TEST(TcpOwnTest, APeerAtALoopbackAddressOrAtOurOwnIsOnThisHost) {
  EXPECT_TRUE(transport::tcp::same_host(htonl(INADDR_LOOPBACK), htonl(0x0a000001)));
  EXPECT_TRUE(transport::tcp::same_host(htonl(0x7f010203), htonl(0x0a000001)));  // 127.1.2.3
  EXPECT_TRUE(transport::tcp::same_host(htonl(0x0a000001), htonl(0x0a000001)));
  EXPECT_FALSE(transport::tcp::same_host(htonl(0x0a000002), htonl(0x0a000001)));
  EXPECT_FALSE(transport::tcp::same_host(htonl(0x807f0001), htonl(0x0a000001)));  // 128.127.0.1
}

// Both ends of a connection to this host carry the algorithm the setting names (the test
// also runs under TETHER_TCP_CONGESTION=cubic, system, a name no kernel has and one too long
// to be a name: ctest).
TEST_F(TcpOwnSelfTest, AConnectionToThisHostGetsTheCongestionControlTheSettingNames) {
  char landed[8] = {};
  Completion received{};
  ASSERT_NO_FATAL_FAILURE(send_to_self("paced", landed, 5, received));
  EXPECT_STREQ(landed, "paced");
  std::vector<std::string> algorithms = congestion_of_connections(wire_address(endpoint_->address()).port);
  ASSERT_EQ(algorithms.size(), 2U) << "the dialled and the accepted end of the connection to itself";
  for (const std::string& algorithm : algorithms) EXPECT_EQ(algorithm, expected_congestion_over_lo());
}

// A listening socket whose accept queue is full: the kernel drops further SYNs, so a
// connect to it neither succeeds nor fails, like one to a host that is down.
class SilentListener {
 public:
  SilentListener() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof local;
    ok_ = ::bind(listener_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0 && ::listen(listener_, 0) == 0 &&
          ::getsockname(listener_, reinterpret_cast<sockaddr*>(&local), &length) == 0;
    address_.port = local.sin_port;
    address_.ipv4 = local.sin_addr.s_addr;
    address_.pid = 1;
    address_.token = 7;
    for (int i = 0; i < 2 && ok_; ++i) {  // one fills the queue (backlog 0 holds one), the next waits
      int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      ok_ = ::connect(filler, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0 || errno == EINPROGRESS;
      fillers_.push_back(filler);
    }
  }
  ~SilentListener() {
    for (int filler : fillers_) ::close(filler);
    ::close(listener_);
  }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::span<const std::byte> address() const {
    return {reinterpret_cast<const std::byte*>(&address_), sizeof address_};
  }

 private:
  int listener_ = -1;
  std::vector<int> fillers_;
  WireAddress address_{};
  bool ok_ = false;
};

// The first frame to a peer that never answers the connect returns at once; the transport
// goes on polling (a send to itself arrives meanwhile), and after TETHER_TCP_CONNECT_TIMEOUT
// (2 s under ctest) the frame fails with peer_unreachable naming the timeout.
TEST(TcpOwnTest, APeerThatNeverAnswersTheConnectFailsAfterTheTimeoutAndBlocksNothing) {
  SilentListener silent;
  ASSERT_TRUE(silent.ok()) << std::strerror(errno);
  auto opened = transport::open_transport("tcp-own:lo");
  ASSERT_TRUE(opened) << opened.error().message();
  auto& endpoint = **opened;
  auto self = endpoint.insert_peer(endpoint.address());
  auto lost = endpoint.insert_peer(silent.address());
  ASSERT_TRUE(self && lost);
  std::vector<char> payload(64 * 1024, 'x');  // above the inject size: its completion reports the outcome
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(endpoint.send(*lost, payload.data(), payload.size(), nullptr, 9), Status::posted)
      << endpoint.last_error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms) << "the send waited for the connect";
  char landed[8] = {};
  ASSERT_EQ(endpoint.post_receive(landed, sizeof landed, nullptr, 3), Status::posted);
  ASSERT_NE(endpoint.send(*self, "alive", 6, nullptr, 0), Status::error) << endpoint.last_error().message();
  const auto timeout = config::Config::global().duration("TETHER_TCP_CONNECT_TIMEOUT");
  bool self_arrived = false;
  Completion failure{};
  Completion completions[4];
  while (failure.failed_kind != CompletionKind::send_done && std::chrono::steady_clock::now() < start + timeout + 10s) {
    std::size_t count = endpoint.poll(completions);
    for (std::size_t i = 0; i < count; ++i) {
      if (completions[i].kind == CompletionKind::receive) self_arrived = true;
      if (completions[i].kind == CompletionKind::error) failure = completions[i];
    }
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(self_arrived) << "the transport stopped polling while it connected";
  EXPECT_STREQ(landed, "alive");
  ASSERT_EQ(failure.failed_kind, CompletionKind::send_done) << "no error completion within the timeout + 10 s";
  EXPECT_EQ(failure.error, Errc::peer_unreachable);
  EXPECT_EQ(failure.context, 9U);
  EXPECT_NE(std::string(failure.cause).find("TETHER_TCP_CONNECT_TIMEOUT"), std::string::npos) << failure.cause;
  EXPECT_GE(waited, timeout);
  EXPECT_EQ(endpoint.send(*lost, "again", 6, nullptr, 0), Status::error) << "a peer whose connect failed is not dead";
  EXPECT_EQ(endpoint.last_error().code, Errc::peer_unreachable);
}

// Two tcp-own endpoints of this process on lo, each inserted at the other, connected by
// one message from `sender` to `receiver`. Only the receiver's posted receives let it read
// message frames, so the sender's socket fills while it posts none.
struct LoopbackPair {
  std::unique_ptr<transport::Transport> sender;
  std::unique_ptr<transport::Transport> receiver;
  transport::PeerIndex receiver_at_sender = transport::kUnknownPeer;
  transport::PeerIndex sender_at_receiver = transport::kUnknownPeer;
  std::vector<Completion> received;  // the receiver's receive completions, in order

  // Polls both; false when either reported an error (named by the test's failure).
  bool poll_both() {
    Completion completions[16];
    for (std::size_t i = 0, n = sender->poll(completions); i < n; ++i) {
      EXPECT_NE(completions[i].kind, CompletionKind::error) << "sender: " << completions[i].cause;
      if (completions[i].kind == CompletionKind::error) return false;
    }
    for (std::size_t i = 0, n = receiver->poll(completions); i < n; ++i) {
      EXPECT_EQ(completions[i].kind, CompletionKind::receive) << "receiver: " << completions[i].cause;
      if (completions[i].kind != CompletionKind::receive) return false;
      received.push_back(completions[i]);
    }
    return true;
  }
  // Polls until the receiver took `count` messages in all; false after 30 s or an error.
  bool receive_until(std::size_t count) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (received.size() < count)
      if (!poll_both() || std::chrono::steady_clock::now() > deadline) return false;
    return true;
  }
  // Sends, polling both while the sender answers retry.
  Status send(const void* buffer, std::size_t length, std::uint64_t context) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      Status status = sender->send(receiver_at_sender, buffer, length, nullptr, context);
      if (status != Status::retry || !poll_both() || std::chrono::steady_clock::now() > deadline) return status;
    }
  }
};

void open_loopback_pair(LoopbackPair& pair) {
  auto sender = transport::open_transport("tcp-own:lo");
  auto receiver = transport::open_transport("tcp-own:lo");
  ASSERT_TRUE(sender && receiver);
  pair.sender = std::move(*sender);
  pair.receiver = std::move(*receiver);
  auto at_sender = pair.sender->insert_peer(pair.receiver->address());
  auto at_receiver = pair.receiver->insert_peer(pair.sender->address());
  ASSERT_TRUE(at_sender && at_receiver);
  pair.receiver_at_sender = *at_sender;
  pair.sender_at_receiver = *at_receiver;
  static char greeting[8];
  ASSERT_EQ(pair.receiver->post_receive(greeting, sizeof greeting, nullptr, 0), Status::posted);
  ASSERT_NE(pair.send("hello", 6, 0), Status::error) << pair.sender->last_error().message();
  ASSERT_TRUE(pair.receive_until(1));
  pair.received.clear();
}

// The receiver takes `count` messages of `bytes` into buffers of its own; each must hold
// fill_pattern(seed = its index), in order.
void expect_patterns_landed(LoopbackPair& pair, const std::deque<std::vector<std::byte>>& landed, std::size_t bytes) {
  std::vector<std::byte> expected(bytes);
  for (std::size_t k = 0; k < landed.size(); ++k) {
    ASSERT_LT(k, pair.received.size());
    EXPECT_EQ(pair.received[k].context, k) << "message " << k << " out of order";
    EXPECT_EQ(pair.received[k].length, bytes);
    fill_pattern(expected.data(), bytes, k);
    EXPECT_EQ(checksum(landed[k].data(), bytes), checksum(expected.data(), bytes))
        << "message " << k << " did not land as sent";
  }
}

// Arms tcp-own's copy-failure injection for one test, and disarms it however the test ends.
class InjectedCopyFailures {
 public:
  InjectedCopyFailures(std::uint32_t successes, std::uint32_t failures) {
    transport::tcp::inject_copy_failures(successes, failures);
  }
  ~InjectedCopyFailures() { transport::tcp::inject_copy_failures(0, 0); }
  InjectedCopyFailures(const InjectedCopyFailures&) = delete;
  InjectedCopyFailures& operator=(const InjectedCopyFailures&) = delete;
};

// tcp-own copies a small payload that has to wait in its queue, so the caller may reuse
// its buffer at once. When that copy fails (injected; as at std::bad_alloc) and none of
// the frame has left, the frame is taken back out of the queue and the send answers
// retry: the caller's buffer, reused at once, must never go out in its place, and the
// message sent again lands once, in order.
TEST(TcpOwnTest, ASmallSendWhoseCopyFailsIsUnqueuedForRetryAndTheCallersReusedBufferNeverLeaves) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  constexpr std::size_t kBytes = 4096;
  ASSERT_LE(kBytes, pair.sender->limits().inject_bytes);
  InjectedCopyFailures injected(1, 1);  // the first frame that waits is copied, the next one's copy fails
  std::vector<std::byte> buffer(kBytes);
  std::uint64_t refused = 0;
  for (Status status = Status::done; status != Status::retry; ++refused) {
    ASSERT_LT(refused, 100000U) << "the receiver's socket never filled";
    fill_pattern(buffer.data(), kBytes, refused);
    status = pair.sender->send(pair.receiver_at_sender, buffer.data(), kBytes, nullptr, refused);
    ASSERT_EQ(status == Status::done || status == Status::retry, true)
        << "a small send answered neither done nor retry: " << pair.sender->last_error().message();
    if (status == Status::retry) break;
  }
  EXPECT_EQ(transport::tcp::injected_copy_failures_left(), 0U) << "the sends never reached the injected failure";
  fill_pattern(buffer.data(), kBytes, 0xdead);  // the caller reuses its buffer at once
  std::deque<std::vector<std::byte>> landed(refused + 2, std::vector<std::byte>(kBytes));
  for (std::size_t k = 0; k < landed.size(); ++k)
    ASSERT_EQ(pair.receiver->post_receive(landed[k].data(), kBytes, nullptr, k), Status::posted);
  for (std::uint64_t k = refused; k < landed.size(); ++k) {
    fill_pattern(buffer.data(), kBytes, k);
    ASSERT_NE(pair.send(buffer.data(), kBytes, k), Status::error) << pair.sender->last_error().message();
  }
  ASSERT_TRUE(pair.receive_until(landed.size())) << pair.received.size() << " of " << landed.size() << " arrived";
  expect_patterns_landed(pair, landed, kBytes);
}

// When the copy fails after part of the frame left, the frame cannot be taken back: the
// connection closes, the send fails naming the cause and the remedy, later sends to that
// peer fail at once, and the receiver got every frame reported done, intact, and nothing
// of the broken one.
TEST(TcpOwnTest, ASmallSendWhoseCopyFailsAfterPartOfItLeftClosesTheConnectionAndSaysWhy) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  const std::size_t bytes = pair.sender->limits().inject_bytes - 100;  // the socket ends up taking part of one
  std::optional<InjectedCopyFailures> injected(std::in_place, 0, UINT32_MAX);
  std::vector<std::byte> buffer(bytes);
  std::deque<std::vector<std::byte>> landed;
  auto post_one_receive = [&] {
    landed.emplace_back(bytes);
    return pair.receiver->post_receive(landed.back().data(), bytes, nullptr, landed.size() - 1);
  };
  std::uint64_t sent = 0;
  Status status = Status::done;
  for (int attempts = 0; status != Status::error; ++attempts) {
    ASSERT_LT(attempts, 100000) << "no send ever left part of a frame";
    fill_pattern(buffer.data(), bytes, sent);
    status = pair.sender->send(pair.receiver_at_sender, buffer.data(), bytes, nullptr, sent);
    if (status == Status::done) ++sent;
    if (status == Status::retry) {  // none of it left (the socket was full): let the receiver take one
      ASSERT_EQ(post_one_receive(), Status::posted);
      ASSERT_TRUE(pair.poll_both());
    }
  }
  injected.reset();
  const Error& error = pair.sender->last_error();
  EXPECT_EQ(error.code, Errc::out_of_memory) << error.message();
  EXPECT_NE(error.cause.find("part of it had left"), std::string::npos) << error.message();
  EXPECT_NE(error.remedy.find("ulimit -v"), std::string::npos) << error.message();
  EXPECT_EQ(pair.sender->send(pair.receiver_at_sender, "late", 5, nullptr, 0), Status::error);
  EXPECT_EQ(pair.sender->last_error().code, Errc::peer_unreachable) << pair.sender->last_error().message();
  while (landed.size() <= sent) ASSERT_EQ(post_one_receive(), Status::posted);  // one more than sent: must stay empty
  ASSERT_TRUE(pair.receive_until(sent)) << pair.received.size() << " of " << sent << " arrived";
  for (auto until = std::chrono::steady_clock::now() + 200ms; std::chrono::steady_clock::now() < until;)
    ASSERT_TRUE(pair.poll_both());
  EXPECT_EQ(pair.received.size(), sent) << "part of the broken frame was delivered as a message";
  landed.pop_back();
  expect_patterns_landed(pair, landed, bytes);
}

// Polls the receiver alone for `span`, keeping its receive completions; other completions
// (failed RMAs and sends to the closed peer) go to `failures`.
void poll_receiver_alone(LoopbackPair& pair, std::chrono::milliseconds span, std::vector<Completion>* failures) {
  Completion completions[16];
  for (auto until = std::chrono::steady_clock::now() + span; std::chrono::steady_clock::now() < until;)
    for (std::size_t i = 0, n = pair.receiver->poll(completions); i < n; ++i) {
      if (completions[i].kind == CompletionKind::receive) pair.received.push_back(completions[i]);
      else if (failures != nullptr) failures->push_back(completions[i]);
      else ADD_FAILURE() << "receiver: " << completions[i].cause;
    }
}

// The sender sends `count` messages of `bytes` (fill_pattern(k), context k), hands them
// all to its socket, and closes. The receiver polls alone with nothing posted (it reads
// the close), then posts one receive at a time, polling between, and one more than sent.
void send_then_close_before_receives(LoopbackPair& pair, std::size_t count, std::size_t bytes) {
  std::vector<std::byte> buffer(bytes);
  for (std::size_t k = 0; k < count; ++k) {
    fill_pattern(buffer.data(), bytes, k);
    ASSERT_EQ(pair.send(buffer.data(), bytes, k), Status::done) << pair.sender->last_error().message();
  }
  for (auto deadline = std::chrono::steady_clock::now() + 30s; pair.sender->holds_unsent();)
    ASSERT_TRUE(pair.poll_both() && std::chrono::steady_clock::now() < deadline) << "the sends never left";
  pair.sender.reset();
  auto poll_receiver_for = [&](std::chrono::milliseconds span) { poll_receiver_alone(pair, span, nullptr); };
  ASSERT_NO_FATAL_FAILURE(poll_receiver_for(100ms));
  std::deque<std::vector<std::byte>> landed;
  while (landed.size() <= count) {
    landed.emplace_back(bytes);
    ASSERT_EQ(pair.receiver->post_receive(landed.back().data(), bytes, nullptr, landed.size() - 1), Status::posted);
    ASSERT_NO_FATAL_FAILURE(poll_receiver_for(2ms));
  }
  ASSERT_NO_FATAL_FAILURE(poll_receiver_for(100ms));
  EXPECT_EQ(pair.received.size(), count) << "messages sent before the peer closed were lost";
  landed.pop_back();
  expect_patterns_landed(pair, landed, bytes);
  EXPECT_EQ(pair.receiver->send(pair.sender_at_receiver, "late", 5, nullptr, 0), Status::error);
  EXPECT_EQ(pair.receiver->last_error().code, Errc::peer_unreachable) << pair.receiver->last_error().message();
}

// Messages the receiver's socket held when their sender closed are still received
// (shm-own's ring outlives its peer too); sends back to the closed peer fail.
TEST(TcpOwnTest, MessagesSentBeforeThePeerClosedReachReceivesPostedAfter) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  ASSERT_NO_FATAL_FAILURE(send_then_close_before_receives(pair, 8, 1024));
}

// The same with more than the receiver's input buffer holds (64 KiB), the close read only
// once the last of them moved into it.
TEST(TcpOwnTest, MoreThanTheInputBufferSentBeforeThePeerClosedAllArrive) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  ASSERT_NO_FATAL_FAILURE(send_then_close_before_receives(pair, 200, 1000));
}

// The receiver learns of the close from a send that fails (it never read the socket): the
// messages still in its socket are received all the same.
TEST(TcpOwnTest, MessagesSentBeforeThePeerClosedSurviveASendToItThatFails) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  constexpr std::size_t kCount = 8, kBytes = 1024;
  std::vector<std::byte> buffer(kBytes);
  Completion completions[16];
  for (std::size_t k = 0; k < kCount; ++k) {
    fill_pattern(buffer.data(), kBytes, k);
    ASSERT_EQ(pair.sender->send(pair.receiver_at_sender, buffer.data(), kBytes, nullptr, k), Status::done);
  }
  for (auto deadline = std::chrono::steady_clock::now() + 30s; pair.sender->holds_unsent();) {
    (void)pair.sender->poll(completions);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the sends never left";
  }
  pair.sender.reset();
  Status sent = Status::done;
  for (int tries = 0; sent != Status::error; ++tries) {
    ASSERT_LT(tries, 100) << "sends to a closed peer kept succeeding";
    std::this_thread::sleep_for(10ms);
    sent = pair.receiver->send(pair.sender_at_receiver, "ping", 5, nullptr, 99);
  }
  EXPECT_EQ(pair.receiver->last_error().code, Errc::peer_unreachable) << pair.receiver->last_error().message();
  std::deque<std::vector<std::byte>> landed;
  while (landed.size() < kCount) {
    landed.emplace_back(kBytes);
    ASSERT_EQ(pair.receiver->post_receive(landed.back().data(), kBytes, nullptr, landed.size() - 1), Status::posted);
  }
  std::vector<Completion> failures;
  poll_receiver_alone(pair, 100ms, &failures);
  EXPECT_EQ(pair.received.size(), kCount) << "messages in the socket were lost when the send failed";
  expect_patterns_landed(pair, landed, kBytes);
}

// Frames of every kind between messages while the connection drains: a write from the
// peer lands (unanswered: nobody to answer), an answer to the receiver's own write (failed
// at the close) is skipped, and the message behind them still arrives.
TEST(TcpOwnTest, WritesAndAnswersBetweenMessagesDoNotEndTheDrain) {
  LoopbackPair pair;
  ASSERT_NO_FATAL_FAILURE(open_loopback_pair(pair));
  constexpr std::size_t kBytes = 256;
  std::vector<std::byte> at_receiver(kBytes), at_sender(kBytes), data(kBytes);
  auto describe = [](transport::Transport& owner, std::vector<std::byte>& memory) {
    auto registration = owner.registrar().register_range(memory.data(), memory.size(), Access::all);
    EXPECT_TRUE(registration);
    auto address = reinterpret_cast<std::uint64_t>(memory.data());
    return transport::RemoteBuffer{address, registration ? registration->remote_key : 0, address, memory.size()};
  };
  transport::RemoteBuffer receiver_memory = describe(*pair.receiver, at_receiver);
  transport::RemoteBuffer sender_memory = describe(*pair.sender, at_sender);
  Completion completions[16];
  ASSERT_EQ(pair.sender->send(pair.receiver_at_sender, "first", 6, nullptr, 0), Status::done);
  fill_pattern(data.data(), kBytes, 5);
  ASSERT_NE(pair.sender->write(pair.receiver_at_sender, data.data(), kBytes, nullptr, receiver_memory, 0, 1),
            Status::error);
  ASSERT_NE(pair.receiver->write(pair.sender_at_receiver, data.data(), kBytes, nullptr, sender_memory, 0, 2),
            Status::error);
  for (auto until = std::chrono::steady_clock::now() + 100ms; std::chrono::steady_clock::now() < until;)
    (void)pair.sender->poll(completions);  // lands the receiver's write and queues its answer
  ASSERT_EQ(pair.sender->send(pair.receiver_at_sender, "second", 7, nullptr, 1), Status::done);
  for (auto deadline = std::chrono::steady_clock::now() + 30s; pair.sender->holds_unsent();) {
    (void)pair.sender->poll(completions);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the sender's frames never left";
  }
  EXPECT_EQ(checksum(at_sender.data(), kBytes), checksum(data.data(), kBytes)) << "the receiver's write did not land";
  pair.sender.reset();
  std::vector<Completion> failures;
  poll_receiver_alone(pair, 100ms, &failures);  // reads the close with no receive posted
  char first[8] = {}, second[8] = {};
  ASSERT_EQ(pair.receiver->post_receive(first, sizeof first, nullptr, 0), Status::posted);
  ASSERT_EQ(pair.receiver->post_receive(second, sizeof second, nullptr, 1), Status::posted);
  poll_receiver_alone(pair, 100ms, &failures);
  ASSERT_EQ(pair.received.size(), 2u) << "the drain ended at the write or the answer";
  EXPECT_STREQ(first, "first");
  EXPECT_STREQ(second, "second");
  EXPECT_EQ(checksum(at_receiver.data(), kBytes), checksum(data.data(), kBytes)) << "the peer's write did not land";
  EXPECT_FALSE(pair.receiver->holds_unsent()) << "an answer was queued for the closed peer";
}

TEST(TcpOwnTest, UnknownInterfaceIsAClearErrorNamingTheOnesUp) {
  auto opened = transport::open_transport("tcp-own:nosuch0");
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, Errc::invalid_argument);
  EXPECT_NE(opened.error().cause.find("nosuch0"), std::string::npos) << opened.error().message();
  EXPECT_NE(opened.error().cause.find("lo (127.0.0.1)"), std::string::npos) << opened.error().message();
  EXPECT_NE(opened.error().remedy.find("TETHER_TCP_INTERFACE"), std::string::npos) << opened.error().message();
}

}  // namespace
}  // namespace tether::testing
