// tether-soak-check SECONDS: ranks 0 and 1 exchange for SECONDS, in rounds, every byte
// verified: a rendezvous message from a user buffer that is unmapped and mapped again at
// the same address every round (the registration cache must notice), a burst of eager
// messages, and a stream through persistent channels created once. Prints what moved and
// the cache's counters; fails on any mismatch or when resident memory grows past a ceiling.
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/messaging/engine.hpp"
#include "tether/persist.hpp"
#include "tether/runtime.hpp"
#include "tests/support/pattern.hpp"
#include "tests/support/rank_check.hpp"
#include "tests/support/start_job.hpp"

namespace {

using tether::Runtime;
using tether::Status;
using tether::testing::fill;
using tether::testing::matches;

constexpr std::size_t kWindowBytes = std::size_t{4} << 20;
constexpr std::size_t kEagerPerRound = 16;
constexpr std::size_t kChannelMessagesPerRound = 8;
#ifdef __SANITIZE_ADDRESS__
constexpr long kRssCeilingKiB = 384 * 1024;  // ASan keeps freed memory in a 256 MiB quarantine
#else
constexpr long kRssCeilingKiB = 64 * 1024;  // growth allowed after the warm-up rounds
#endif
constexpr std::uint64_t kWarmupRounds = 10;

struct Totals {
  std::uint64_t rounds = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes_verified = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t remaps = 0;
  std::uint64_t address_taken = 0;  // another mapping took the window between unmap and map
};

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") return status >> value ? value : 0;
    status.ignore(256, '\n');
  }
  return 0;
}

void count(Totals& totals, std::span<const std::byte> landed, std::uint64_t source, std::uint64_t sequence) {
  ++totals.messages;
  if (matches(landed, source, sequence)) {
    totals.bytes_verified += landed.size();
  } else {
    ++totals.mismatches;
  }
}

// The window: unmapped, then mapped again at the same address (fresh zero pages).
std::byte* remap(std::byte* window, Totals& totals) {
  CHECK(::munmap(window, kWindowBytes) == 0, "munmap: {}", std::strerror(errno));
  void* again = ::mmap(window, kWindowBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ++totals.remaps;
  if (again == window) return window;
  if (again != MAP_FAILED) ::munmap(again, kWindowBytes);
  ++totals.address_taken;
  again = ::mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return again == MAP_FAILED ? nullptr : static_cast<std::byte*>(again);
}

// One rendezvous message through the window; the sender alternates by round.
void user_buffer_message(Runtime& runtime, std::byte*& window, Totals& totals) {
  int me = runtime.rank(), peer = 1 - me;
  bool sending = static_cast<std::uint64_t>(me) == totals.rounds % 2;
  std::size_t bytes = (std::size_t{64} << 10) << (totals.rounds % 6);  // 64 KiB .. 2 MiB
  window = remap(window, totals);
  if (window == nullptr) return;
  std::span<std::byte> buffer(window, bytes);
  tether::Request request;
  std::uint64_t sender = static_cast<std::uint64_t>(sending ? me : peer);
  if (sending) fill(buffer, sender, totals.rounds);
  Status started = sending ? runtime.isend(buffer.data(), bytes, peer, 1, request)
                           : runtime.irecv(buffer.data(), bytes, peer, 1, request);
  CHECK(started != Status::error && runtime.wait(request) == Status::done, "round {}: {}", totals.rounds,
        runtime.last_error().message());
  if (!sending) count(totals, buffer, sender, totals.rounds);
}

// A burst of eager messages each way, sizes up to 4 KiB, from heap buffers.
void eager_burst(Runtime& runtime, Totals& totals) {
  int me = runtime.rank(), peer = 1 - me;
  std::vector<std::vector<std::byte>> out(kEagerPerRound), in(kEagerPerRound);
  std::vector<tether::Request> requests(2 * kEagerPerRound);
  for (std::size_t i = 0; i < kEagerPerRound; ++i) {
    std::size_t bytes = (totals.rounds * 131 + i * 977) % 4097;
    out[i].resize(bytes);
    in[i].resize(bytes);
    fill(out[i], static_cast<std::uint64_t>(me), totals.rounds * kEagerPerRound + i);
    CHECK(runtime.irecv(in[i].data(), bytes, peer, 2, requests[2 * i]) != Status::error, "irecv");
    CHECK(runtime.isend(out[i].data(), bytes, peer, 2, requests[2 * i + 1]) != Status::error, "isend");
  }
  CHECK(runtime.wait_all(requests) == Status::done, "eager burst: {}", runtime.last_error().message());
  for (std::size_t i = 0; i < kEagerPerRound; ++i)
    count(totals, in[i], static_cast<std::uint64_t>(peer), totals.rounds * kEagerPerRound + i);
}

// kChannelMessagesPerRound messages each way through channels created once.
void channel_stream(Runtime& runtime, tether::SendChannel& out, tether::ReceiveChannel& in, Totals& totals) {
  int me = runtime.rank(), peer = 1 - me;
  std::size_t slot = out.shape().slot_bytes;
  std::uint64_t base = totals.rounds * kChannelMessagesPerRound;
  std::uint64_t sent = 0, received = 0;
  while (sent < kChannelMessagesPerRound || received < kChannelMessagesPerRound) {
    std::span<std::byte> buffer;
    if (sent < kChannelMessagesPerRound && out.next_buffer(buffer) == Status::done) {
      std::size_t bytes = (base + sent) * 53 % (slot + 1);
      fill(buffer.first(bytes), static_cast<std::uint64_t>(me), base + sent);
      Status status = out.start(bytes);
      CHECK(status != Status::error, "start: {}", out.last_error().message());
      if (status == Status::done || status == Status::posted) ++sent;
    }
    std::span<const std::byte> message;
    Status arrived = in.test(message);
    CHECK(arrived != Status::error, "test: {}", in.last_error().message());
    if (arrived != Status::done) continue;
    count(totals, message, static_cast<std::uint64_t>(peer), base + received++);
    CHECK(in.release() == Status::done, "release: {}", in.last_error().message());
  }
  CHECK(out.wait() == Status::done, "wait: {}", out.last_error().message());
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  auto runtime = tether::testing::start_job_or_exit("tether-soak-check", 2);
  Runtime& rt = *runtime;
  tether::ChannelShape shape{.peer = 1 - rt.rank(), .tag = 3, .slot_bytes = 1024, .slots = 4};
  auto out = tether::SendChannel::create(rt, shape);
  auto in = tether::ReceiveChannel::create(rt, shape);
  if (!out || !in) {
    fmt::print(stderr, "channel: {}\n", !out ? out.error().message() : in.error().message());
    return 1;
  }
  auto* window = static_cast<std::byte*>(::mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  Totals totals;
  long rss_after_warmup = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool go = true;
  while (go && window != MAP_FAILED && window != nullptr) {
    user_buffer_message(rt, window, totals);
    eager_burst(rt, totals);
    channel_stream(rt, *out, *in, totals);
    if (++totals.rounds == kWarmupRounds) rss_after_warmup = resident_kib();
    // Both ranks stop after the same round: rank 0 decides and tells rank 1.
    char more = std::chrono::steady_clock::now() < deadline ? 1 : 0;
    tether::Request request;
    Status started = rt.rank() == 0 ? rt.isend(&more, 1, 1, 9, request) : rt.irecv(&more, 1, 0, 9, request);
    CHECK(started != Status::error && rt.wait(request) == Status::done, "stop flag: {}", rt.last_error().message());
    go = more == 1 && tether::testing::rank_checks_passed();
  }
  long growth = rss_after_warmup > 0 ? resident_kib() - rss_after_warmup : 0;
  auto cache = rt.engine().user_cache_stats();
  fmt::print("rank {}: {} rounds, {} messages, {} bytes verified, {} mismatches; user buffer remapped {} times "
             "({} times elsewhere); cache: {} registrations, {} hits, {} invalidations; resident memory grew {} KiB "
             "after round {}\n",
             rt.rank(), totals.rounds, totals.messages, totals.bytes_verified, totals.mismatches, totals.remaps,
             totals.address_taken, cache.registrations, cache.hits, cache.invalidations, growth, kWarmupRounds);
  CHECK(totals.mismatches == 0, "{} messages differ from what was sent", totals.mismatches);
  CHECK(totals.rounds > kWarmupRounds, "only {} rounds: give it more seconds", totals.rounds);
  CHECK(growth <= kRssCeilingKiB, "resident memory grew {} KiB (ceiling {} KiB)", growth, kRssCeilingKiB);
  CHECK(cache.registrations > 0, "the user buffers were never registered through the cache");
  // Every entry but the last was registered for a window that was remapped since.
  CHECK(cache.invalidations + 1 >= cache.registrations, "{} registrations but {} invalidations: a remapped buffer "
        "kept its registration", cache.registrations, cache.invalidations);
  if (tether::testing::rank_checks_passed()) fmt::print("rank {}: soak passed\n", rt.rank());
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
