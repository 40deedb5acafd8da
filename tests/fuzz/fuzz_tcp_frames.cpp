// tcp-own's receiving side on a stream that holds any bytes: a real TcpTransport on lo, a
// raw TCP client that sends the fuzzer's bytes and closes, then poll() until the
// transport let go of the connection. Writes may aim at a registered window mapped at a
// fixed address, so the corpus can name it; its key is random, so every 8 bytes of input
// that read "KKKKKKKK" are replaced by it, and "TTTTTTTT" by the endpoint's token (which a
// hello must quote). The transport must never write outside the
// window or past a posted receive (ASan checks), and completions must be sane.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_input.hpp"
#include "transport/tcp/tcp_transport.hpp"

using namespace tether::transport;
using namespace tether::transport::tcp;

namespace {

constexpr std::uintptr_t kWindowAddress = 0x7e0000000000;  // make_corpus.py aims writes here
constexpr std::size_t kWindowBytes = 4096;
constexpr std::size_t kReceiveBytes = 64;
constexpr int kReceives = 4;
constexpr int kPollsPerInput = 400;
constexpr std::uint64_t kKeyPlaceholder = 0x4b4b4b4b4b4b4b4bULL;    // "KKKKKKKK"
constexpr std::uint64_t kTokenPlaceholder = 0x5454545454545454ULL;  // "TTTTTTTT"

struct Target {
  std::unique_ptr<Transport> transport;
  WireAddress address{};
  std::byte* window = nullptr;
  std::uint64_t key = 0;
  std::byte receives[kReceives][kReceiveBytes + 16] = {};  // 16 guard bytes after each
};

Target* open_target() {
  auto* target = new Target();
  auto opened = TcpTransport::open("lo");
  FUZZ_ASSERT(opened.has_value());
  target->transport = std::move(*opened);
  std::memcpy(&target->address, target->transport->address().data(), sizeof target->address);
  void* window = ::mmap(reinterpret_cast<void*>(kWindowAddress), kWindowBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  FUZZ_ASSERT(window == reinterpret_cast<void*>(kWindowAddress));
  target->window = static_cast<std::byte*>(window);
  auto registration = target->transport->registrar().register_range(window, kWindowBytes, tether::Access::all);
  FUZZ_ASSERT(registration.has_value() && registration->remote_key != 0);
  target->key = registration->remote_key;
  for (int i = 0; i < kReceives; ++i)
    FUZZ_ASSERT(target->transport->post_receive(target->receives[i], kReceiveBytes, nullptr, i) == tether::Status::posted);
  return target;
}

int connect_raw(const WireAddress& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_addr.s_addr = address.ipv4;
  remote.sin_port = address.port;
  FUZZ_ASSERT(fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0);
  return fd;
}

void check(Target& target, const Completion& completion) {
  switch (completion.kind) {
    case CompletionKind::receive: {
      FUZZ_ASSERT(completion.context < kReceives && completion.length <= kReceiveBytes);
      auto slot = static_cast<int>(completion.context);
      for (std::size_t i = kReceiveBytes; i < kReceiveBytes + 16; ++i) FUZZ_ASSERT(target.receives[slot][i] == std::byte{0});
      FUZZ_ASSERT(target.transport->post_receive(target.receives[slot], kReceiveBytes, nullptr, completion.context) ==
                  tether::Status::posted);
      break;
    }
    case CompletionKind::remote_write: {
      auto start = reinterpret_cast<std::uintptr_t>(completion.buffer);
      FUZZ_ASSERT(start >= kWindowAddress && start - kWindowAddress + completion.length <= kWindowBytes);
      break;
    }
    default:
      FUZZ_ASSERT(false && "a completion of a kind nothing was posted for");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Target* target = open_target();
  std::vector<std::uint8_t> stream(data, data + size);
  const std::pair<std::uint64_t, std::uint64_t> secrets[] = {{kKeyPlaceholder, target->key},
                                                             {kTokenPlaceholder, target->address.token}};
  for (auto [placeholder, secret] : secrets) {
    for (std::size_t at = 0; at + sizeof placeholder <= stream.size(); ++at)
      if (std::memcmp(stream.data() + at, &placeholder, sizeof placeholder) == 0)
        std::memcpy(stream.data() + at, &secret, sizeof secret);
  }
  data = stream.data();
  int fd = connect_raw(target->address);
  std::size_t sent = 0;
  while (sent < size) {
    ssize_t now = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (now <= 0) break;  // the transport closed it, or its window is full: enough
    sent += static_cast<std::size_t>(now);
  }
  ::shutdown(fd, SHUT_WR);
  Completion completions[8];
  char answers[4096];
  for (int i = 0; i < kPollsPerInput; ++i) {
    std::size_t count = target->transport->poll(completions);
    for (std::size_t c = 0; c < count; ++c) check(*target, completions[c]);
    while (::recv(fd, answers, sizeof answers, MSG_DONTWAIT) > 0) {
    }
  }
  ::close(fd);
  for (int i = 0; i < 2 * 64; ++i) {  // the transport sees the end and drops the connection
    std::size_t count = target->transport->poll(completions);
    for (std::size_t c = 0; c < count; ++c) check(*target, completions[c]);
  }
  return 0;
}
