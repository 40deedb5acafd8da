// tether-link-down-check MARKER_FILE: run as 3 ranks on 3 hosts (tether-run --netns
// h1,h2,h3; rank r on host r+1) by link_down_test.sh. Rank 0 exchanges a checksummed
// message with rank 1 and with rank 2 every round (every fifth one is 64 KiB, rendezvous).
// After kRoundsBeforeMarker rounds rank 0 creates MARKER_FILE and the test pulls host 3's
// link. Then rank 0's requests with rank 2, and rank 2's with rank 0, must fail with
// peer_unreachable naming the peer, and ranks 0 and 1 must keep exchanging verified
// messages for kRoundsAfterLoss more rounds. Exit 0 = pass.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tether/runtime.hpp"
#include "tests/support/rank_check.hpp"
#include "tests/support/start_job.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using tether::Request;
using tether::Runtime;
using tether::Status;

constexpr int kRoundsBeforeMarker = 20;
constexpr int kRoundsAfterLoss = 100;
constexpr int kMaxRounds = 20000;  // the link never went down: fail instead of running on
constexpr int kTag = 5;
constexpr std::size_t kHeaderBytes = 2 * sizeof(std::uint64_t);  // round, last flag

std::size_t bytes_of(int round) { return round % 5 == 4 ? 65536 : 1024; }

std::byte pattern(int sender, int round, std::size_t i) {
  return static_cast<std::byte>((static_cast<std::size_t>(sender) * 131 + static_cast<std::size_t>(round) * 7 + i) >> 1);
}

std::vector<std::byte> make_message(int sender, int round, bool last) {
  std::vector<std::byte> message(bytes_of(round));
  const std::uint64_t header[2] = {static_cast<std::uint64_t>(round), last ? 1U : 0U};
  std::memcpy(message.data(), header, kHeaderBytes);
  for (std::size_t i = kHeaderBytes; i < message.size(); ++i) message[i] = pattern(sender, round, i);
  return message;
}

// Counts bytes that differ from what `sender` sends in `round`.
std::size_t wrong_bytes(const std::vector<std::byte>& message, int sender, int round) {
  std::uint64_t header[2];
  std::memcpy(header, message.data(), kHeaderBytes);
  std::size_t wrong = header[0] == static_cast<std::uint64_t>(round) ? 0 : 1;
  for (std::size_t i = kHeaderBytes; i < message.size(); ++i) wrong += message[i] != pattern(sender, round, i);
  return wrong;
}

struct Exchange {
  bool ok = false;
  bool peer_said_last = false;
  std::string error;
};

Status wait_request(Runtime& runtime, Request& request, std::string& error) {
  if (!request.valid()) return Status::done;
  Status status = runtime.wait(request);
  if (status != Status::done && error.empty()) error = runtime.last_error().message();
  return status;
}

// One round with `peer`: both sides send and receive; the received message is verified.
Exchange exchange(Runtime& runtime, int peer, int round, bool last) {
  Exchange result;
  auto out = make_message(runtime.rank(), round, last);
  std::vector<std::byte> in(bytes_of(round));
  Request receive, send;
  if (runtime.irecv(in.data(), in.size(), peer, kTag, receive) == Status::error ||
      runtime.isend(out.data(), out.size(), peer, kTag, send) == Status::error)
    result.error = runtime.last_error().message();
  bool received = wait_request(runtime, receive, result.error) == Status::done;
  bool sent = wait_request(runtime, send, result.error) == Status::done;
  result.ok = received && sent && result.error.empty();
  if (!result.ok) return result;
  std::size_t wrong = wrong_bytes(in, peer, round);
  CHECK(wrong == 0, "round {}: {} of {} bytes from rank {} differ", round, wrong, in.size(), peer);
  std::uint64_t header[2];
  std::memcpy(header, in.data(), kHeaderBytes);
  result.peer_said_last = header[1] != 0;
  return result;
}

double wall_seconds() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

void create_marker(const char* path) {
  if (std::FILE* file = std::fopen(path, "w")) {
    std::fclose(file);
    return;
  }
  CHECK(false, "cannot create marker file {}", path);
}

void report_loss(int rank, int peer, Clock::time_point last_heard, const std::string& error) {
  double quiet = std::chrono::duration<double>(Clock::now() - last_heard).count();
  fmt::print("rank {} lost rank {} at {:.3f}, {:.2f} s after its last message: {}\n", rank, peer, wall_seconds(),
             quiet, error);
  std::fflush(stdout);
}

// Rank 0: rounds with ranks 1 and 2 until rank 2 is lost, then kRoundsAfterLoss with rank 1.
void run_hub(Runtime& runtime, const char* marker) {
  bool have_rank2 = true;
  int rounds_after_loss = 0;
  Clock::time_point last_from_rank2 = Clock::now();
  for (int round = 0;; ++round) {
    bool last = (!have_rank2 && rounds_after_loss == kRoundsAfterLoss) || round == kMaxRounds;
    Exchange with1 = exchange(runtime, 1, round, last);
    CHECK(with1.ok, "round {} with rank 1 failed: {}", round, with1.error);
    if (!with1.ok || last) break;
    if (have_rank2) {
      Exchange with2 = exchange(runtime, 2, round, false);
      if (with2.ok) last_from_rank2 = Clock::now();
      if (!with2.ok) report_loss(0, 2, last_from_rank2, with2.error);
      have_rank2 = with2.ok;
    } else {
      ++rounds_after_loss;
    }
    if (round == kRoundsBeforeMarker) create_marker(marker);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(!have_rank2, "host 3's link never went down in {} rounds", kMaxRounds);
  if (tether::testing::rank_checks_passed())
    fmt::print("verified: rank 0 exchanged with rank 1 through {} rounds after losing rank 2\n", rounds_after_loss);
}

// Rank 1: answers rank 0 until it says the last round came.
void run_partner(Runtime& runtime) {
  for (int round = 0;; ++round) {
    Exchange with0 = exchange(runtime, 0, round, false);
    CHECK(with0.ok, "round {} with rank 0 failed: {}", round, with0.error);
    if (!with0.ok || with0.peer_said_last) break;
  }
}

// Rank 2: answers rank 0 until its link is pulled and the exchange fails. Its PMIx server
// is behind the same link, so it leaves without finalizing (the launcher accepts exit 0).
[[noreturn]] void run_isolated(Runtime& runtime) {
  Clock::time_point last_from_rank0 = Clock::now();
  for (int round = 0; round < kMaxRounds; ++round) {
    Exchange with0 = exchange(runtime, 0, round, false);
    if (!with0.ok) {
      report_loss(2, 0, last_from_rank0, with0.error);
      std::_Exit(tether::testing::rank_checks_passed() ? 0 : 1);
    }
    last_from_rank0 = Clock::now();
  }
  CHECK(false, "host 3's link never went down in {} rounds", kMaxRounds);
  std::fflush(nullptr);
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: tether-link-down-check MARKER_FILE (3 ranks, see tests/netns/README.md)\n", stderr);
    return 2;
  }
  auto runtime = tether::testing::start_job_or_exit("tether-link-down-check", 3);
  Runtime& rt = *runtime;
  if (rt.rank() == 0) run_hub(rt, argv[1]);
  if (rt.rank() == 1) run_partner(rt);
  if (rt.rank() == 2) run_isolated(rt);
  return tether::testing::rank_checks_passed() ? 0 : 1;
}
