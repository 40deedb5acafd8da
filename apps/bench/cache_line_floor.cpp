// tether-bench-cache-line: the floor under any on-node latency. Two processes on two CPUs
// bounce one 64-byte line through shared memory (each writes the counter the other waits
// for); half a round trip is the least time in which anything one CPU stores can be seen
// by the other. The bench scripts print it beside the 8 B figures of the same run.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "apps/bench/bench_options.hpp"
#include "runtime/base/cpus.hpp"

namespace {

constexpr long kDefaultRoundTrips = 1'000'000;
constexpr std::size_t kLineBytes = 64;

// Each side writes its own line; the counters are what the other side waits for.
struct alignas(kLineBytes) Counter {
  std::atomic<long> value{0};
};
struct SharedLines {
  Counter ping;
  Counter pong;
};


void print_usage(const char* program) {
  fmt::print("usage: {} [--iterations N] [--csv]\n"
             "  --iterations N   timed round trips (default {}; a tenth more untimed first)\n"
             "  --csv            one CSV row (api,size_bytes,latency_us,bandwidth_mbs) instead of the table\n"
             "Runs on the first two CPUs this process may use.\n",
             program, kDefaultRoundTrips);
}

// false: exit with `exit_code` (usage printed, or the bad argument named).
bool parse(int argc, char** argv, tether::bench::HelperFlags& options, int& exit_code) {
  for (int i = 1; i < argc; ++i) {
    auto taken = tether::bench::take_helper_flag(argc, argv, i, options);
    if (taken == tether::bench::FlagTaken::refused) return exit_code = 2, false;
    if (taken == tether::bench::FlagTaken::yes) continue;
    print_usage(argv[0]);
    return exit_code = std::string_view(argv[i]) == "--help" ? 0 : 2, false;
  }
  return true;
}

void answer(SharedLines& lines, long round_trips) {
  for (long i = 1; i <= round_trips; ++i) {
    while (lines.ping.value.load(std::memory_order_acquire) != i) {
    }
    lines.pong.value.store(i, std::memory_order_release);
  }
}

// Microseconds the round trips from `first` to `last` took.
double ask(SharedLines& lines, long first, long last) {
  auto start = std::chrono::steady_clock::now();
  for (long i = first; i <= last; ++i) {
    lines.ping.value.store(i, std::memory_order_release);
    while (lines.pong.value.load(std::memory_order_acquire) != i) {
    }
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  tether::bench::HelperFlags options{kDefaultRoundTrips, false};
  int exit_code = 0;
  if (!parse(argc, argv, options, exit_code)) return exit_code;
  std::vector<int> cpus = tether::base::allowed_cpus();
  if (cpus.size() < 2) {
    fmt::print(stderr, "tether-bench-cache-line: this process may run on one CPU only; it needs two (taskset -c 0,1)\n");
    return 1;
  }
  void* mapped = mmap(nullptr, sizeof(SharedLines), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) {
    fmt::print(stderr, "tether-bench-cache-line: mmap of {} bytes failed: {}\n", sizeof(SharedLines), std::strerror(errno));
    return 1;
  }
  auto* lines = new (mapped) SharedLines;
  long warmup = options.iterations / 10;
  long total = warmup + options.iterations;
  pid_t answerer = fork();
  if (answerer < 0) {
    fmt::print(stderr, "tether-bench-cache-line: fork failed: {} (raise ulimit -u, or free memory)\n",
               std::strerror(errno));
    return 1;
  }
  if (answerer == 0) {
    (void)tether::base::bind_to_cpu(cpus[1]);
    answer(*lines, total);
    _exit(0);
  }
  (void)tether::base::bind_to_cpu(cpus[0]);
  (void)ask(*lines, 1, warmup);
  double latency_us = ask(*lines, warmup + 1, total) / (2.0 * static_cast<double>(options.iterations));
  int status = 0;
  waitpid(answerer, &status, 0);
  if (options.csv) {
    fmt::print("api,size_bytes,latency_us,bandwidth_mbs\ncache-line,{},{:.3f},0\n", kLineBytes, latency_us);
    return 0;
  }
  fmt::print("# tether cache-line floor: one 64-byte line bounced between CPUs {} and {} (two processes)\n"
             "# {:<12}{:>16}\n{:<14}{:>16.3f}\n",
             cpus[0], cpus[1], "Size", "Latency (us)", kLineBytes, latency_us);
  return 0;
}
