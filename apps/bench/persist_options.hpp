// Options of tether-bench-persist and tether-mpi-bench-persist: one run measures latency
// and bandwidth at every size, so both programs share these settings and this parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "apps/bench/bench_options.hpp"

namespace tether::bench {

enum class OutputFormat { table, csv, json };

struct PersistOptions {
  std::vector<std::size_t> sizes_bytes;  // powers of --step from 1 B to --max-size, unless --sizes
  long latency_iterations = 10000;       // round trips at small sizes; scaled down above 8 KiB
  long latency_warmup = 200;
  long bandwidth_iterations = 100;       // windows at small sizes; scaled down above 64 KiB
  long bandwidth_warmup = 10;
  int window = 64;                       // bandwidth: messages started before the acknowledgement
  std::uint32_t latency_slots = 2;       // landing slots of the ping-pong channels
  std::uint32_t bandwidth_slots = 4;     // landing slots of the streaming channel; 0: the window
  OutputFormat output = OutputFormat::table;
  bool corrupt_first_message = false;    // --inject-fault corrupt: proves verification fails
};

// Parses argv; prints usage or the reason and returns nullopt when the program should exit
// (`exit_code` says with what).
std::optional<PersistOptions> parse_persist_options(int argc, char** argv, int& exit_code);

// The shared loops' settings for one test, so iteration scaling is the same as
// tether-pingpong's and tether-bw's.
[[nodiscard]] Options loop_options(const PersistOptions& options, Test test);
[[nodiscard]] std::uint32_t streaming_slots(const PersistOptions& options);
[[nodiscard]] std::size_t largest_size(const PersistOptions& options);

}  // namespace tether::bench
