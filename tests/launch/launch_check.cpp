// tether-launch-check: runs as every rank of a job. Checks the identity PMIx reports, puts
// a rank-specific value, fences, fetches every peer's value and verifies it byte by byte.
// Failure modes for the launcher tests: --die-rank R (SIGKILL itself before publishing),
// --quit-rank R (_exit(0) there, without PMIx_Finalize), --hang-rank R (sleep after the
// fence), --abort-rank R (Bootstrap::abort with code 7, or --abort-code C).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "runtime/bootstrap/bootstrap.hpp"
#include "tests/launch/launch_check_payload.hpp"

namespace {

using tether::testing::fnv1a;
using tether::testing::payload_of;

constexpr std::string_view kKey = "launch-check.value";

struct CheckOptions {
  int die_rank = -1;
  int quit_rank = -1;
  int hang_rank = -1;
  int abort_rank = -1;
  int abort_code = 7;
  int expect_size = -1;
  bool bad_requests = false;
  std::size_t payload_bytes = 4096;
};

CheckOptions parse(int argc, char** argv) {
  CheckOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--bad-requests") options.bad_requests = true;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag(argv[i]);
    long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--die-rank") options.die_rank = static_cast<int>(value);
    else if (flag == "--quit-rank") options.quit_rank = static_cast<int>(value);
    else if (flag == "--hang-rank") options.hang_rank = static_cast<int>(value);
    else if (flag == "--abort-rank") options.abort_rank = static_cast<int>(value);
    else if (flag == "--abort-code") options.abort_code = static_cast<int>(value);
    else if (flag == "--expect-size") options.expect_size = static_cast<int>(value);
    else if (flag == "--payload") options.payload_bytes = static_cast<std::size_t>(value);
  }
  return options;
}

int fail(int rank, const std::string& what) {
  fmt::print(stderr, "launch-check rank {}: FAILED: {}\n", rank, what);
  std::fflush(stderr);
  return 1;
}

int check_identity(const tether::Bootstrap& boot, const CheckOptions& options) {
  const auto& id = boot.identity();
  if (id.rank < 0 || id.rank >= id.size) return fail(id.rank, fmt::format("rank outside 0..{}", id.size));
  if (options.expect_size >= 0 && id.size != options.expect_size)
    return fail(id.rank, fmt::format("job size {} instead of {}", id.size, options.expect_size));
  auto self = std::find(id.local_peers.begin(), id.local_peers.end(), id.rank);
  if (self == id.local_peers.end()) return fail(id.rank, "own rank missing from the local peers");
  if (id.local_rank != static_cast<int>(self - id.local_peers.begin()))
    return fail(id.rank, fmt::format("local rank {} is not this rank's index among local peers", id.local_rank));
  if (static_cast<int>(id.local_peers.size()) != id.size)
    return fail(id.rank, fmt::format("{} local peers on a single-node job of {}", id.local_peers.size(), id.size));
  if (id.hostname.empty()) return fail(id.rank, "empty hostname");
  return 0;
}

// The survivors' side of --die-rank and --quit-rank: operations naming the dead rank must fail, quickly.
int expect_peer_death(tether::Bootstrap& boot, int dead) {
  const auto start = std::chrono::steady_clock::now();
  auto fenced = boot.fence();
  auto got = boot.get(dead, kKey);
  auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  const std::string name = fmt::format("rank {}", dead);
  fmt::print("launch-check rank {}: fence {}\n", boot.rank(), fenced ? "completed" : "failed: " + fenced.error().message());
  if (got) return fail(boot.rank(), fmt::format("get from dead {} succeeded", name));
  if (got.error().message().find(name) == std::string::npos || got.error().code != tether::Errc::peer_unreachable)
    return fail(boot.rank(), fmt::format("get error does not name {}: {}", name, got.error().message()));
  if (boot.peer_alive(dead)) return fail(boot.rank(), fmt::format("{} still reported alive", name));
  fmt::print("launch-check rank {}: detected death of {} in {} ms: {}\n", boot.rank(), name, elapsed_ms,
             got.error().message());
  std::fflush(stdout);
  return 0;
}

int expect_error(int rank, const tether::Expected<std::vector<std::byte>>& got, tether::Errc code,
                 const std::string& needle, std::string_view what) {
  if (got) return fail(rank, fmt::format("{} succeeded", what));
  if (got.error().code != code || got.error().message().find(needle) == std::string::npos)
    return fail(rank, fmt::format("{}: unexpected error: {}", what, got.error().message()));
  fmt::print("launch-check rank {}: {} rejected: {}\n", rank, what, got.error().message());
  return 0;
}

// Requests that can never work get clear errors instead of hanging or crashing.
int reject_bad_requests(tether::Bootstrap& boot) {
  const int rank = boot.rank();
  const int peer = (rank + 1) % boot.size();
  int failed = expect_error(rank, boot.get(boot.size(), kKey), tether::Errc::invalid_argument,
                            fmt::format("rank {} does not exist", boot.size()), "get from an unknown rank");
  failed |= expect_error(rank, boot.get(-1, kKey), tether::Errc::invalid_argument, "rank -1 does not exist",
                         "get from rank -1");
  failed |= expect_error(rank, boot.get(peer, std::string(600, 'k')), tether::Errc::invalid_argument,
                         "600 characters", "get with a 600-character key");
  auto missing = boot.get(peer, "launch-check.never-put");
  if (missing) return fail(rank, "get of a key nobody put succeeded");
  auto code = missing.error().code;
  if (code != tether::Errc::invalid_argument && code != tether::Errc::timeout)
    return fail(rank, fmt::format("get of a key nobody put: unexpected error: {}", missing.error().message()));
  fmt::print("launch-check rank {}: get of a key nobody put rejected: {}\n", rank, missing.error().message());
  std::fflush(stdout);
  return failed;
}

int exchange_and_verify(tether::Bootstrap& boot, const CheckOptions& options) {
  const int rank = boot.rank();
  if (auto put = boot.put(kKey, payload_of(rank, options.payload_bytes)); !put) return fail(rank, put.error().message());
  if (auto published = boot.publish(); !published) return fail(rank, published.error().message());
  if (options.die_rank >= 0) return expect_peer_death(boot, options.die_rank);
  if (options.quit_rank >= 0) return expect_peer_death(boot, options.quit_rank);
  if (auto fenced = boot.fence(); !fenced) return fail(rank, fenced.error().message());
  std::uint64_t digest = fnv1a({});
  for (int peer = 0; peer < boot.size(); ++peer) {
    auto got = boot.get(peer, kKey);
    if (!got) return fail(rank, got.error().message());
    if (*got != payload_of(peer, options.payload_bytes))
      return fail(rank, fmt::format("rank {}'s value differs ({} bytes)", peer, got->size()));
    digest = fnv1a(*got, digest);
  }
  if (options.bad_requests && reject_bad_requests(boot) != 0) return 1;
  if (auto fenced = boot.fence(); !fenced) return fail(rank, fenced.error().message());
  fmt::print("launch-check rank {} of {} ok: verified {} peers, digest {:016x}\n", rank, boot.size(), boot.size(), digest);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const CheckOptions options = parse(argc, argv);
  auto boot = tether::Bootstrap::connect();
  if (!boot) {
    fmt::print(stderr, "launch-check: {}\n", boot.error().message());
    return 2;
  }
  auto& bootstrap = **boot;
  if (int failed = check_identity(bootstrap, options)) return failed;
  if (bootstrap.rank() == options.die_rank) raise(SIGKILL);
  if (bootstrap.rank() == options.quit_rank) _exit(0);
  if (bootstrap.rank() == options.abort_rank) bootstrap.abort(options.abort_code, "launch-check was asked to abort");
  int status = exchange_and_verify(bootstrap, options);
  if (bootstrap.rank() == options.hang_rank) std::this_thread::sleep_for(std::chrono::minutes(10));
  return status;
}
