// tether-bench-transport: ping-pong latency and RMA-write bandwidth between two forked
// processes over one transport, printed as OSU-style tables.
//   tether-bench-transport [--transport ofi:shm|ofi:tcp|verbs] [--domain NAME]
//                          [--iterations N] [--sizes a,b,c] [--bw-sizes a,b,c] [--csv]
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/base/cpus.hpp"
#include "tether/pool.hpp"
#include "transport/transport.hpp"

namespace {

using tether::Status;
using tether::transport::Completion;
using tether::transport::CompletionKind;
using tether::transport::Transport;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string transport = "ofi:shm";
  std::string domain;
  long iterations = 10000;
  std::vector<std::size_t> latency_sizes = {8, 1024, 65536, 1 << 20};
  std::vector<std::size_t> bandwidth_sizes = {65536, 1 << 20, 4 << 20};
  std::size_t window = 64;
  bool csv = false;
};

std::vector<std::size_t> parse_sizes(const char* text) {
  std::vector<std::size_t> sizes;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    sizes.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return sizes;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--transport") options.transport = value, ++i;
    else if (flag == "--domain") options.domain = value, ++i;
    else if (flag == "--iterations") options.iterations = std::atol(value), ++i;
    else if (flag == "--sizes") options.latency_sizes = parse_sizes(value), ++i;
    else if (flag == "--bw-sizes") options.bandwidth_sizes = parse_sizes(value), ++i;
    else if (flag == "--csv") options.csv = true;
    else {
      std::fprintf(stderr, "usage: %s [--transport ofi:shm|ofi:tcp|verbs] [--domain NAME] "
                           "[--iterations N] [--sizes a,b] [--bw-sizes a,b] [--csv]\n", argv[0]);
      std::exit(flag == "--help" ? 0 : 2);
    }
  }
  if (options.domain.empty() && options.transport == "ofi:tcp") options.domain = "lo";
  return options;
}

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "tether-bench-transport: %s\n", why.c_str());
  std::_Exit(1);
}

void write_all(int fd, const void* data, std::size_t size) {
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) die("control channel write failed");
}
void read_all(int fd, void* data, std::size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t got = ::read(fd, bytes, size);
    if (got <= 0) die("control channel closed: the other process failed");
    bytes += got;
    size -= static_cast<std::size_t>(got);
  }
}

// One side of the benchmark: a transport with its peer and reusable buffers.
struct BenchSide {
  std::unique_ptr<Transport> transport;
  tether::transport::PeerIndex peer = 0;
  char* send_buffer = nullptr;
  char* receive_buffer = nullptr;
  Completion completions[16];
  std::uint64_t arrived[6] = {};
  std::uint64_t sends_posted = 0;

  // Polls once and counts what arrived by kind; nothing is lost while waiting for another kind.
  void poll_once() {
    std::size_t count = transport->poll(completions);
    for (std::size_t i = 0; i < count; ++i) {
      if (completions[i].kind == CompletionKind::error)
        die(fmt::format("{}: error completion: {} ({})", transport->name(),
                        tether::errc_name(completions[i].error), completions[i].cause));
      ++arrived[static_cast<int>(completions[i].kind)];
    }
  }
  // Polls until `wanted` completions of `kind` arrived, and consumes them.
  void wait_for(CompletionKind kind, std::uint64_t wanted = 1) {
    auto& count = arrived[static_cast<int>(kind)];
    while (count < wanted) poll_once();
    count -= wanted;
  }
  // Waits until every posted send completed: a rendezvous needs the sender to poll.
  void drain_sends() {
    wait_for(CompletionKind::send_done, sends_posted);
    sends_posted = 0;
  }
  void send(std::size_t size);
  template <class Post>
  void post(Post&& post_once) {
    for (;;) {
      Status status = post_once();
      if (status == Status::posted || status == Status::done) return;
      if (status == Status::error) die(transport->last_error().message());
      poll_once();
    }
  }
};

void BenchSide::send(std::size_t size) {
  for (;;) {
    Status status = transport->send(peer, send_buffer, size, nullptr, 0);
    if (status == Status::done) return;
    if (status == Status::posted) {
      ++sends_posted;
      return;
    }
    if (status == Status::error) die(transport->last_error().message());
    poll_once();
  }
}

BenchSide connect(const Options& options, int control, std::size_t buffer_bytes) {
  BenchSide side;
  side.send_buffer = static_cast<char*>(tether::pinned_alloc(buffer_bytes, 4096));
  side.receive_buffer = static_cast<char*>(tether::pinned_alloc(buffer_bytes, 4096));
  if (!side.send_buffer || !side.receive_buffer) die(tether::pinned_last_error().message());
  std::memset(side.send_buffer, 1, buffer_bytes);
  tether::transport::OpenOptions open_options;
  open_options.domain = options.domain;
  auto opened = tether::transport::open_transport(options.transport, open_options);
  if (!opened) die(opened.error().message());
  side.transport = std::move(*opened);
  if (auto attached = side.transport->attach_pool(); !attached) die(attached.error().message());
  auto own = side.transport->address();
  std::uint64_t length = own.size();
  write_all(control, &length, sizeof(length));
  write_all(control, own.data(), own.size());
  read_all(control, &length, sizeof(length));
  std::vector<std::byte> other(length);
  read_all(control, other.data(), other.size());
  auto inserted = side.transport->insert_peer(other);
  if (!inserted) die(inserted.error().message());
  side.peer = *inserted;
  return side;
}

// Waits for the other side while polling: its last rendezvous may need our progress.
void barrier(BenchSide& side, int control) {
  char byte = 0;
  write_all(control, &byte, 1);
  pollfd entry{control, POLLIN, 0};
  while (::poll(&entry, 1, 0) == 0) side.poll_once();
  read_all(control, &byte, 1);
}

// One-way latency in microseconds: half the mean round trip.
double ping_pong(BenchSide& side, bool initiator, std::size_t size, long iterations, int control) {
  long warmup = std::max(10L, iterations / 10);
  double result = 0;
  for (int phase = 0; phase < 2; ++phase) {
    long rounds = phase == 0 ? warmup : iterations;
    side.post([&] { return side.transport->post_receive(side.receive_buffer, size, nullptr, 0); });
    barrier(side, control);
    auto start = Clock::now();
    for (long i = 0; i < rounds; ++i) {
      if (initiator) side.send(size);
      side.wait_for(CompletionKind::receive);
      if (i + 1 < rounds)
        side.post([&] { return side.transport->post_receive(side.receive_buffer, size, nullptr, 0); });
      if (!initiator) side.send(size);
    }
    std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
    result = elapsed.count() / (2.0 * static_cast<double>(rounds));
    side.drain_sends();
  }
  return result;
}

// One-way latency of an RMA write with notification (what a persistent channel's message
// is): each side writes into the other's buffer and waits for the peer's notification.
double write_ping_pong(BenchSide& side, bool initiator, std::size_t size, long iterations, int control,
                       const tether::transport::RemoteBuffer& target) {
  auto write_once = [&] {
    side.post([&] {
      return side.transport->write_with_notification(side.peer, side.send_buffer, size, nullptr, target, 0, 1, 0);
    });
  };
  barrier(side, control);
  auto start = Clock::now();
  for (long i = 0; i < iterations; ++i) {
    if (initiator) write_once();
    side.wait_for(CompletionKind::remote_write);
    if (!initiator) write_once();
  }
  std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
  side.wait_for(CompletionKind::write_done, static_cast<std::uint64_t>(iterations));
  return elapsed.count() / (2.0 * static_cast<double>(iterations));
}

// RMA-write bandwidth in MB/s: windows of writes, then a notified zero-byte write that
// the target answers with a message once everything landed.
double write_bandwidth(BenchSide& side, bool initiator, std::size_t size, std::size_t window,
                       long iterations, int control, const tether::transport::RemoteBuffer& target) {
  side.post([&] { return side.transport->post_receive(side.receive_buffer, 8, nullptr, 0); });
  barrier(side, control);
  auto start = Clock::now();
  if (initiator) {
    for (long i = 0; i < iterations; ++i) {
      for (std::size_t w = 0; w < window; ++w)
        side.post([&] { return side.transport->write(side.peer, side.send_buffer, size, nullptr, target, 0, w); });
      side.wait_for(CompletionKind::write_done, window);
    }
    side.post([&] { return side.transport->write_with_notification(side.peer, side.send_buffer, 0, nullptr, target, 0, 1, 0); });
    side.wait_for(CompletionKind::receive);
  } else {
    side.wait_for(CompletionKind::remote_write);
    side.send(8);
    side.drain_sends();
  }
  std::chrono::duration<double> elapsed = Clock::now() - start;
  double bytes = static_cast<double>(size) * static_cast<double>(window) * static_cast<double>(iterations);
  return bytes / elapsed.count() / 1e6;
}

long iterations_for(long base, std::size_t size) {
  if (size >= (1 << 20)) return std::max(20L, base / 100);
  if (size >= 65536) return std::max(100L, base / 10);
  return base;
}

void run_side(const Options& options, bool initiator, int control) {
  std::size_t largest = 8;
  for (auto size : options.latency_sizes) largest = std::max(largest, size);
  for (auto size : options.bandwidth_sizes) largest = std::max(largest, size);
  BenchSide side = connect(options, control, largest);
  if (initiator && !options.csv) {
    std::printf("# tether-bench-transport %s (%s)\n# Size      Latency (us)\n", options.transport.c_str(),
                std::string(side.transport->name()).c_str());
  }
  for (auto size : options.latency_sizes) {
    double latency = ping_pong(side, initiator, size, iterations_for(options.iterations, size), control);
    if (!initiator) continue;
    if (options.csv) std::printf("latency_us,%zu,%.3f\n", size, latency);
    else std::printf("%-11zu %.2f\n", size, latency);
    std::fflush(stdout);
  }
  auto remote = side.transport->describe_pool_buffer(side.receive_buffer, largest);
  if (!remote) die(remote.error().message());
  tether::transport::RemoteBuffer target = *remote;
  write_all(control, &target, sizeof(target));
  read_all(control, &target, sizeof(target));
  if (initiator && !options.csv) std::printf("# Size      Latency (us)  RMA write with notification\n");
  for (auto size : options.latency_sizes) {
    double latency = write_ping_pong(side, initiator, size, iterations_for(options.iterations, size), control, target);
    if (!initiator) continue;
    if (options.csv) std::printf("write_latency_us,%zu,%.3f\n", size, latency);
    else std::printf("%-11zu %.2f\n", size, latency);
    std::fflush(stdout);
  }
  if (initiator && !options.csv) std::printf("# Size      Bandwidth (MB/s)  RMA write, window %zu\n", options.window);
  for (auto size : options.bandwidth_sizes) {
    long rounds = std::max(4L, iterations_for(options.iterations, size) / static_cast<long>(options.window));
    double bandwidth = write_bandwidth(side, initiator, size, options.window, rounds, control, target);
    if (!initiator) continue;
    if (options.csv) std::printf("bandwidth_mbs,%zu,%.1f\n", size, bandwidth);
    else std::printf("%-11zu %.1f\n", size, bandwidth);
    std::fflush(stdout);
  }
  barrier(side, control);
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse_options(argc, argv);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die("socketpair failed");
  // One CPU each, as tether-run binds the 2 ranks it compares with (--bind-to auto).
  std::vector<int> cpus = tether::base::allowed_cpus();
  pid_t children[2];
  for (int i = 0; i < 2; ++i) {
    children[i] = ::fork();
    if (children[i] == 0) {
      int cpu = cpus.size() >= 2 ? cpus[static_cast<std::size_t>(i)] : -1;
      if (cpu >= 0 && !tether::base::bind_to_cpu(cpu))
        std::fprintf(stderr, "tether-bench-transport: could not bind side %d to CPU %d: running unbound\n", i, cpu);
      ::close(fds[1 - i]);
      run_side(options, i == 0, fds[i]);
      std::fflush(stdout);
      std::_Exit(0);
    }
  }
  ::close(fds[0]);
  ::close(fds[1]);
  int failures = 0;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failures == 0 ? 0 : 1;
}
