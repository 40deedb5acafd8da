// Option parsing, iteration scaling, data patterns and the OSU-style table.
#include "apps/bench/bench_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace tether::bench {
namespace {

constexpr std::size_t kLargestDefaultBytes = std::size_t{4} << 20;
constexpr std::size_t kLargeLatencyBytes = 8192;      // above this, fewer iterations
constexpr std::size_t kLargeBandwidthBytes = 65536;
constexpr long kMinimumIterations = 2;

std::size_t large_bytes(const Options& options) {
  return options.test == Test::latency ? kLargeLatencyBytes : kLargeBandwidthBytes;
}

std::vector<std::size_t> default_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 1; bytes <= kLargestDefaultBytes; bytes *= 2) sizes.push_back(bytes);
  return sizes;
}

void print_usage(std::string_view program, Test test) {
  fmt::print("usage: {} [--sizes LIST] [--iterations N] [--warmup N]{} [--csv] [--user-buffers]\n", program,
             test == Test::bandwidth ? " [--window N]" : "");
  fmt::print("  --sizes 8,1K,1M   message sizes in bytes (default: powers of two, 1 B to 4 MiB)\n"
             "  --iterations N    timed iterations at small sizes; fewer above {} B\n"
             "  --warmup N        untimed iterations before each size\n"
             "  --csv             CSV rows instead of the OSU-style table\n"
             "  --user-buffers    malloc'd buffers instead of the pinned pool\n",
             test == Test::latency ? kLargeLatencyBytes : kLargeBandwidthBytes);
  if (test == Test::bandwidth) fmt::print("  --window N        messages in flight per iteration (default 64)\n");
}

bool refuse(std::string_view flag, std::string_view value, std::string_view remedy) {
  fmt::print(stderr, "option {} '{}' is not valid: {}\n", flag, value, remedy);
  return false;
}

// Applies one flag that takes a value; false (after saying why) when it is not valid.
bool apply_valued_flag(Options& options, std::string_view flag, std::string_view value) {
  if (flag == "--sizes") {
    auto sizes = parse_size_list(value);
    if (!sizes) return refuse(flag, value, kSizesRemedy);
    options.sizes_bytes = *sizes;
  } else if (flag == "--iterations" || flag == "--warmup" || flag == "--window") {
    auto count = parse_count(value, flag == "--warmup" ? 0 : 1);
    if (!count) return refuse(flag, value, kCountRemedy);
    if (flag == "--iterations") options.iterations = *count;
    if (flag == "--warmup") options.warmup = *count;
    if (flag == "--window") options.window = static_cast<int>(std::min(*count, 4096L));
  } else {
    return refuse(flag, value, "unknown option; see --help");
  }
  return true;
}

Options defaults_for(Test test) {
  Options options;
  options.test = test;
  options.sizes_bytes = default_sizes();
  options.iterations = test == Test::latency ? 10000 : 100;
  options.warmup = test == Test::latency ? 200 : 10;
  return options;
}

}  // namespace

std::optional<std::size_t> parse_size(std::string_view text) {
  std::size_t value = 0;
  const char* last = text.data() + text.size();
  auto [end, error] = std::from_chars(text.data(), last, value);
  if (error != std::errc{}) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(last - end));
  int shift = -1;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  if (shift < 0 || value > (kLargestMessageBytes >> shift)) return std::nullopt;
  return value << shift;
}

std::optional<std::vector<std::size_t>> parse_size_list(std::string_view text) {
  std::vector<std::size_t> sizes;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    auto size = parse_size(text.substr(0, comma));
    if (!size) return std::nullopt;
    sizes.push_back(*size);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  if (sizes.empty()) return std::nullopt;
  return sizes;
}

FlagTaken take_helper_flag(int argc, char** argv, int& i, HelperFlags& flags) {
  std::string_view argument = argv[i];
  if (argument == "--csv") return flags.csv = true, FlagTaken::yes;
  if (argument != "--iterations" || i + 1 >= argc) return FlagTaken::no;
  auto count = parse_count(argv[++i], 1);
  if (!count) {
    std::fprintf(stderr, "--iterations %s: give a whole number from 1 to 1000000000\n", argv[i]);
    return FlagTaken::refused;
  }
  flags.iterations = *count;
  return FlagTaken::yes;
}

std::optional<long> parse_count(std::string_view text, long minimum) {
  long value = 0;
  const char* last = text.data() + text.size();
  auto [end, error] = std::from_chars(text.data(), last, value);
  if (error != std::errc{} || end != last || value < minimum || value > kMostCount) return std::nullopt;
  return value;
}

std::optional<Options> parse_options(int argc, char** argv, Test test, int& exit_code) {
  Options options = defaults_for(test);
  exit_code = 2;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      print_usage(argv[0], test);
      exit_code = 0;
      return std::nullopt;
    }
    if (flag == "--csv") {
      options.csv = true;
    } else if (flag == "--user-buffers") {
      options.user_buffers = true;
    } else if (i + 1 >= argc) {
      refuse(flag, "", "it takes a value, or is unknown; see --help");
      return std::nullopt;
    } else if (!apply_valued_flag(options, flag, argv[++i])) {
      return std::nullopt;
    }
  }
  return options;
}

long iterations_for(const Options& options, std::size_t bytes) {
  if (bytes <= large_bytes(options)) return options.iterations;
  double scaled = static_cast<double>(options.iterations) * static_cast<double>(large_bytes(options)) /
                  static_cast<double>(bytes);
  return std::max(kMinimumIterations, static_cast<long>(scaled));
}

long warmup_for(const Options& options, std::size_t bytes) {
  if (bytes <= large_bytes(options) || options.warmup == 0) return options.warmup;
  return std::max(1L, options.warmup * iterations_for(options, bytes) / options.iterations);
}

std::size_t largest_size(const Options& options) {
  return *std::max_element(options.sizes_bytes.begin(), options.sizes_bytes.end());
}

void print_header(const Options& options, std::string_view library) {
  bool latency = options.test == Test::latency;
  if (options.csv) {
    fmt::print("{}\n", latency ? "size_bytes,latency_us" : "size_bytes,bandwidth_mbs");
  } else {
    fmt::print("# {} {} Test\n", library, latency ? "Latency" : "Bandwidth");
    fmt::print("# Buffers: {}{}\n", options.user_buffers ? "malloc'd" : "pinned pool",
               latency ? "" : fmt::format(", window {}", options.window));
    fmt::print("{}\n", latency ? "# Size          Latency (us)" : "# Size      Bandwidth (MB/s)");
  }
  std::fflush(stdout);
}

void print_row(const Options& options, std::size_t bytes, double value) {
  if (options.csv) fmt::print("{},{:.2f}\n", bytes, value);
  else fmt::print("{:<10}{:>18.2f}\n", bytes, value);
  std::fflush(stdout);
}

namespace {
// Depends on the size too, so a stale buffer from the previous size cannot pass.
std::byte pattern_byte(std::size_t index, std::size_t bytes, int seed_rank) {
  auto seed = static_cast<std::size_t>(seed_rank + 1) * 40503u + bytes * 7919u;
  auto mixed = (index * 2654435761u) ^ seed ^ (index >> 9);
  return static_cast<std::byte>(mixed >> 5);
}
std::uint64_t mix(std::uint64_t sum, std::byte value) { return sum * 131 + static_cast<std::uint64_t>(value); }
}  // namespace

std::uint64_t fill_pattern(std::byte* data, std::size_t bytes, int seed_rank) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum = mix(sum, data[i] = pattern_byte(i, bytes, seed_rank));
  return sum;
}

std::uint64_t pattern_checksum(std::size_t bytes, int seed_rank) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum = mix(sum, pattern_byte(i, bytes, seed_rank));
  return sum;
}

std::uint64_t checksum(const std::byte* data, std::size_t bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes; ++i) sum = mix(sum, data[i]);
  return sum;
}

}  // namespace tether::bench
