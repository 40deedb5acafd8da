// Options, iteration counts, data patterns and OSU-style output shared by the tether and
// MPI ping-pong/bandwidth apps, so both print the same tables from the same settings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tether::bench {

enum class Test { latency, bandwidth };

struct Options {
  Test test = Test::latency;
  std::vector<std::size_t> sizes_bytes;  // 1 B .. 4 MiB, powers of two, unless --sizes
  long iterations = 0;                   // at small sizes; scaled down above large_bytes
  long warmup = 0;
  int window = 64;                       // bandwidth: messages in flight per iteration
  bool csv = false;
  bool user_buffers = false;             // malloc'd instead of the pinned pool
};

// Parses argv; prints usage or the reason and returns nullopt when the program should exit
// (`exit_code` says with what).
std::optional<Options> parse_options(int argc, char** argv, Test test, int& exit_code);

// The largest message a bench takes, and the most iterations (their products stay in range).
inline constexpr std::size_t kLargestMessageBytes = std::size_t{1} << 30;
inline constexpr long kMostCount = 1'000'000'000;
inline constexpr std::string_view kSizesRemedy =
    "give byte counts separated by commas, e.g. --sizes 8,1K,1M, each at most 1G";
inline constexpr std::string_view kCountRemedy = "give a whole number from 1 to 1000000000 (a warm-up may be 0)";

// "64", "8K", "1M", "1G": a byte count with an optional binary suffix, at most
// kLargestMessageBytes; "8,1K,1M": a list of them.
[[nodiscard]] std::optional<std::size_t> parse_size(std::string_view text);
[[nodiscard]] std::optional<std::vector<std::size_t>> parse_size_list(std::string_view text);
// A whole number from `minimum` to kMostCount.
[[nodiscard]] std::optional<long> parse_count(std::string_view text, long minimum);

// The flags the one-process helper benches share (tether-bench-cache-line, tether-bench-copy).
struct HelperFlags {
  long iterations = 0;
  bool csv = false;
};
enum class FlagTaken { no, yes, refused };
// Takes argv[i] if it is --csv or --iterations N (i then past N); refused: --iterations
// had no whole number of at least 1 (the reason printed to stderr).
[[nodiscard]] FlagTaken take_helper_flag(int argc, char** argv, int& i, HelperFlags& flags);

[[nodiscard]] long iterations_for(const Options& options, std::size_t bytes);
[[nodiscard]] long warmup_for(const Options& options, std::size_t bytes);
[[nodiscard]] std::size_t largest_size(const Options& options);

// `library` names what is measured: "tether" or "Open MPI".
void print_header(const Options& options, std::string_view library);
void print_row(const Options& options, std::size_t bytes, double value);

// The bytes rank `seed_rank` sends at size `bytes`; receivers compare checksums.
std::uint64_t fill_pattern(std::byte* data, std::size_t bytes, int seed_rank);
[[nodiscard]] std::uint64_t pattern_checksum(std::size_t bytes, int seed_rank);
[[nodiscard]] std::uint64_t checksum(const std::byte* data, std::size_t bytes);

}  // namespace tether::bench
