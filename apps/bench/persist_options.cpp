// Option parsing of the persistent-channel benchmarks.
#include "apps/bench/persist_options.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace tether::bench {
namespace {

constexpr std::size_t kDefaultLargestBytes = std::size_t{4} << 20;
constexpr long kMostWindow = 4096;

void print_usage(std::string_view program) {
  fmt::print("usage: {} [--sizes LIST | --max-size SIZE --step 2|4] [--iterations N] [--warmup N]\n"
             "       [--bw-iterations N] [--bw-warmup N] [--window N] [--slots N] [--bw-slots N] [--csv | --json]\n",
             program);
  fmt::print("  --sizes 8,1K,1M     message sizes in bytes (default: powers of --step from 1 B to --max-size)\n"
             "  --max-size SIZE     largest default size (default 4M)\n"
             "  --step 2|4          default sizes are powers of 2 (default) or of 4\n"
             "  --iterations N      timed round trips per size up to 8 KiB, fewer above (default 10000)\n"
             "  --warmup N          untimed round trips before them (default 200)\n"
             "  --bw-iterations N   timed windows per size up to 64 KiB, fewer above (default 100)\n"
             "  --bw-warmup N       untimed windows before them (default 10)\n"
             "  --window N          messages started before each acknowledgement (default 64)\n"
             "  --slots N           landing slots of the ping-pong channels (default 2)\n"
             "  --bw-slots N        landing slots of the streaming channel (default 4: a 64-message window\n"
             "                      streams through 4 cache-warm slots; 0: as many slots as the window)\n"
             "  --csv, --json       CSV rows or one JSON object instead of the OSU-style tables\n"
             "  --inject-fault corrupt   for tests: damage the first message, so verification must fail\n");
}

bool refuse(std::string_view flag, std::string_view value, std::string_view remedy) {
  fmt::print(stderr, "option {} '{}' is not valid: {}\n", flag, value, remedy);
  return false;
}

std::vector<std::size_t> powers_up_to(std::size_t largest_bytes, std::size_t step) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 1; bytes <= largest_bytes; bytes *= step) sizes.push_back(bytes);
  return sizes;
}

bool apply_count(PersistOptions& options, std::string_view flag, long count) {
  if (flag == "--iterations") options.latency_iterations = count;
  else if (flag == "--warmup") options.latency_warmup = count;
  else if (flag == "--bw-iterations") options.bandwidth_iterations = count;
  else if (flag == "--bw-warmup") options.bandwidth_warmup = count;
  else if (flag == "--window") options.window = static_cast<int>(std::min(count, kMostWindow));
  else if (flag == "--slots") options.latency_slots = static_cast<std::uint32_t>(std::min(count, kMostWindow));
  else if (flag == "--bw-slots") options.bandwidth_slots = static_cast<std::uint32_t>(std::min(count, kMostWindow));
  else return false;
  return true;
}

struct SizeChoice {
  std::optional<std::vector<std::size_t>> listed;
  std::size_t largest_bytes = kDefaultLargestBytes;
  std::size_t step = 2;
};

bool apply_size_flag(SizeChoice& choice, std::string_view flag, std::string_view value) {
  if (flag == "--sizes") {
    choice.listed = parse_size_list(value);
    return choice.listed || refuse(flag, value, kSizesRemedy);
  }
  if (flag == "--max-size") {
    auto largest = parse_size(value);
    if (largest && *largest > 0) choice.largest_bytes = *largest;
    return (largest && *largest > 0) || refuse(flag, value, "give a byte count such as 1M, at most 1G");
  }
  choice.step = value == "4" ? 4 : 2;
  return value == "2" || value == "4" || refuse(flag, value, "give 2 or 4");
}

// Applies one flag that takes a value; false (after saying why) when it is not valid.
bool apply_valued_flag(PersistOptions& options, SizeChoice& sizes, std::string_view flag, std::string_view value) {
  if (flag == "--sizes" || flag == "--max-size" || flag == "--step") return apply_size_flag(sizes, flag, value);
  if (flag == "--inject-fault") {
    options.corrupt_first_message = value == "corrupt";
    return options.corrupt_first_message || refuse(flag, value, "the only fault is 'corrupt'");
  }
  bool warmup = flag == "--warmup" || flag == "--bw-warmup";
  auto count = parse_count(value, warmup ? 0 : 1);
  if (!count) return refuse(flag, value, kCountRemedy);
  return apply_count(options, flag, *count) || refuse(flag, value, "unknown option; see --help");
}

}  // namespace

std::optional<PersistOptions> parse_persist_options(int argc, char** argv, int& exit_code) {
  PersistOptions options;
  SizeChoice sizes;
  exit_code = 2;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      print_usage(argv[0]);
      exit_code = 0;
      return std::nullopt;
    }
    if (flag == "--csv" || flag == "--json") {
      options.output = flag == "--csv" ? OutputFormat::csv : OutputFormat::json;
    } else if (i + 1 >= argc) {
      refuse(flag, "", "it takes a value, or is unknown; see --help");
      return std::nullopt;
    } else if (!apply_valued_flag(options, sizes, flag, argv[++i])) {
      return std::nullopt;
    }
  }
  options.sizes_bytes = sizes.listed ? *sizes.listed : powers_up_to(sizes.largest_bytes, sizes.step);
  return options;
}

Options loop_options(const PersistOptions& options, Test test) {
  Options loop;
  loop.test = test;
  loop.sizes_bytes = options.sizes_bytes;
  bool latency = test == Test::latency;
  loop.iterations = latency ? options.latency_iterations : options.bandwidth_iterations;
  loop.warmup = latency ? options.latency_warmup : options.bandwidth_warmup;
  loop.window = options.window;
  return loop;
}

std::uint32_t streaming_slots(const PersistOptions& options) {
  return options.bandwidth_slots != 0 ? options.bandwidth_slots : static_cast<std::uint32_t>(options.window);
}

std::size_t largest_size(const PersistOptions& options) {
  return *std::max_element(options.sizes_bytes.begin(), options.sizes_bytes.end());
}

}  // namespace tether::bench
