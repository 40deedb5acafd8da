// What each rank measured, what rank 0 makes of it, and the three output formats
// (OSU-style table with # comments, --csv, --json).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "apps/core/problem.hpp"

namespace tether::apps {

// Gathered from every rank as raw bytes, so it must stay trivially copyable.
struct RankReport {
  double total_s = 0;
  double comm_s = 0;
  double compute_s = 0;
  double halo_bytes_per_iteration = 0;
  std::uint64_t checksum = 0;
  double analytic_max_error = 0;
  double analytic_max_exact = 0;
  // The first listed mode's time over this mode's in the same round, median over rounds:
  // neighbouring rounds share the machine's slow and fast stretches, which fastest rounds
  // taken apart do not (1 for the first mode, or with one round).
  double paired_speedup = 1;
};

struct RunSummary {
  std::string app;
  std::string comm;
  bool overlap = true;             // the interior was computed while the halos travelled
  Problem problem;
  int ranks = 1;
  double iteration_us_min = 0;     // over ranks, of each rank's mean time per iteration
  double iteration_us_median = 0;
  double comm_share_percent = 0;   // median over ranks of comm time / loop time
  double halo_bytes_per_s = 0;     // all ranks' halo bytes per iteration / median iteration time
  double mflops = 0;               // stencil flops per iteration / median iteration time
  double paired_speedup = 1;       // median over ranks of RankReport::paired_speedup
  std::uint64_t checksum = 0;      // sum of the ranks' checksums
  double analytic_relative_error = 0;
  // Verification outcome.
  bool verified = false;
  std::string verification;        // one sentence: what was compared and how it went
  std::string png_path;
};

[[nodiscard]] RunSummary summarise(std::span<const RankReport> reports, const Problem& problem);

// `reference_rounds[r] / mode_rounds[r]` over the rounds both ran, median (1 without any).
[[nodiscard]] double paired_speedup(std::span<const double> reference_rounds, std::span<const double> mode_rounds);

// Several modes of one run must leave the same field, bit for bit: where they do not,
// every mode is marked not verified, with each mode's checksum named.
void require_identical_fields(std::span<RunSummary> summaries);

enum class OutputFormat { table, csv, json };

[[nodiscard]] std::string format_summary(const RunSummary& summary, OutputFormat format);
// Several modes of one run: one table (header of the first, a row per mode), one CSV
// header and a row per mode, or a JSON array. One summary: as format_summary.
[[nodiscard]] std::string format_summaries(std::span<const RunSummary> summaries, OutputFormat format);

}  // namespace tether::apps
