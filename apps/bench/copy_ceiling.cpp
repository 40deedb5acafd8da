// tether-bench-copy: the ceiling over one-copy on-node bandwidth. One process copies SIZE
// bytes from one buffer into another, over and over, as a channel's direct store copies a
// message into the slot released last; a transfer that copies each byte once (tether's
// shm-own, Open MPI's CMA) cannot move bytes faster. The bench scripts print it beside the
// 1 MiB figures of the same run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#include "apps/bench/bench_options.hpp"

namespace {

struct CopyOptions {
  std::size_t bytes = std::size_t{1} << 20;
  tether::bench::HelperFlags flags{2000, false};  // iterations: timed copies
};

void print_usage(const char* program) {
  fmt::print("usage: {} [--size SIZE] [--iterations N] [--csv]\n"
             "  --size SIZE      bytes per copy (default 1M)\n"
             "  --iterations N   timed copies (default 2000; a tenth more untimed first)\n"
             "  --csv            one CSV row (api,size_bytes,latency_us,bandwidth_mbs) instead of the table\n",
             program);
}

// false: exit with `exit_code` (usage printed, or the bad argument named).
bool parse(int argc, char** argv, CopyOptions& options, int& exit_code) {
  for (int i = 1; i < argc; ++i) {
    auto taken = tether::bench::take_helper_flag(argc, argv, i, options.flags);
    if (taken == tether::bench::FlagTaken::refused) return exit_code = 2, false;
    if (taken == tether::bench::FlagTaken::yes) continue;
    if (std::string_view(argv[i]) == "--size" && i + 1 < argc) {
      auto bytes = tether::bench::parse_size(argv[++i]);
      if (!bytes || *bytes == 0) {
        fmt::print(stderr, "--size {}: give a size from 1 byte to 1G, e.g. 1M\n", argv[i]);
        return exit_code = 2, false;
      }
      options.bytes = *bytes;
      continue;
    }
    print_usage(argv[0]);
    return exit_code = std::string_view(argv[i]) == "--help" ? 0 : 2, false;
  }
  return true;
}

struct FreeDeleter {
  void operator()(void* pointer) const noexcept { std::free(pointer); }
};

// Microseconds per copy of `options.bytes` into the same destination.
double time_copies(const CopyOptions& options, std::byte* destination, const std::byte* source) {
  for (long i = 0; i < options.flags.iterations / 10; ++i) std::memcpy(destination, source, options.bytes);
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < options.flags.iterations; ++i) {
    std::memcpy(destination, source, options.bytes);
    asm volatile("" : : "r"(destination) : "memory");  // every copy happens
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(options.flags.iterations);
}

}  // namespace

int main(int argc, char** argv) {
  CopyOptions options;
  int exit_code = 0;
  if (!parse(argc, argv, options, exit_code)) return exit_code;
  std::size_t rounded = (options.bytes + 4095) / 4096 * 4096;
  std::unique_ptr<void, FreeDeleter> source(std::aligned_alloc(4096, rounded));
  std::unique_ptr<void, FreeDeleter> destination(std::aligned_alloc(4096, rounded));
  if (!source || !destination) {
    fmt::print(stderr, "tether-bench-copy: no memory for two buffers of {} bytes\n", options.bytes);
    return 1;
  }
  std::memset(source.get(), 1, options.bytes);
  std::memset(destination.get(), 2, options.bytes);
  double us = time_copies(options, static_cast<std::byte*>(destination.get()), static_cast<const std::byte*>(source.get()));
  double mbs = static_cast<double>(options.bytes) / us;  // bytes per microsecond = MB/s
  if (options.flags.csv) {
    fmt::print("api,size_bytes,latency_us,bandwidth_mbs\nmemcpy,{},{:.3f},{:.2f}\n", options.bytes, us, mbs);
    return 0;
  }
  fmt::print("# tether copy ceiling: memcpy of {} bytes into the same destination, one process\n"
             "# {:<12}{:>16}{:>20}\n{:<14}{:>16.3f}{:>20.2f}\n",
             options.bytes, "Size", "Latency (us)", "Bandwidth (MB/s)", options.bytes, us, mbs);
  return 0;
}
