#include "apps/core/report.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "apps/core/stencil.hpp"

namespace tether::apps {
namespace {

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

std::string json_escape(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      escaped += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    escaped += c;
  }
  return escaped;
}

// The table's header: the run, then the column names. `comm` names every mode of the run.
std::string table_header(const RunSummary& s, std::string_view comm) {
  std::string text = fmt::format(
      "# {} comm={} ranks={} procs={} grid={} radius={} fields={} iterations={} compute-us={} stencil={} "
      "overlap={}\n",
      s.app, comm, s.ranks, format_procs(s.problem), format_cells(s.problem), s.problem.radius, s.problem.fields,
      s.problem.iterations, s.problem.compute_us, stencil_copy_name(), s.overlap ? "on" : "off");
  text += fmt::format("# checksum 0x{:016x}\n", s.checksum);
  text += fmt::format("# {:<12}{:>16}{:>18}{:>16}{:>16}{:>14}\n", "Comm", "Iter min (us)", "Iter median (us)",
                      "Comm share (%)", "Halo MB/s", "MFlop/s");
  return text;
}

std::string table_row(const RunSummary& s) {
  return fmt::format("{:<14}{:>16.2f}{:>18.2f}{:>16.1f}{:>16.1f}{:>14.1f}\n", s.comm, s.iteration_us_min,
                     s.iteration_us_median, s.comm_share_percent, s.halo_bytes_per_s / 1e6, s.mflops);
}

constexpr std::string_view kCsvHeader =
    "app,comm,ranks,procs,grid,radius,fields,iterations,compute_us,iter_us_min,iter_us_median,"
    "comm_share_percent,halo_mb_per_s,mflops,checksum,verified,overlap,paired_speedup\n";

std::string csv_row(const RunSummary& s) {
  return fmt::format(
      "{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.2f},{:.3f},{:.3f},0x{:016x},{},{},{:.4f}\n",
      s.app, s.comm, s.ranks, format_procs(s.problem), format_cells(s.problem), s.problem.radius,
      s.problem.fields, s.problem.iterations, s.problem.compute_us, s.iteration_us_min, s.iteration_us_median,
      s.comm_share_percent, s.halo_bytes_per_s / 1e6, s.mflops, s.checksum, s.verified ? "yes" : "no",
      s.overlap ? "on" : "off", s.paired_speedup);
}

std::string format_json(const RunSummary& s) {
  return fmt::format(
      "{{\"app\": \"{}\", \"comm\": \"{}\", \"ranks\": {}, \"procs\": \"{}\", \"grid\": \"{}\", "
      "\"radius\": {}, \"fields\": {}, \"iterations\": {}, \"compute_us\": {}, "
      "\"iteration_us\": {{\"min\": {:.3f}, \"median\": {:.3f}}}, \"comm_share_percent\": {:.2f}, "
      "\"halo_bytes_per_s\": {:.1f}, \"mflops\": {:.3f}, \"checksum\": \"0x{:016x}\", "
      "\"analytic_relative_error\": {:.3e}, \"verified\": {}, \"verification\": \"{}\", \"png\": {}, "
      "\"overlap\": {}, \"paired_speedup\": {:.4f}}}\n",
      s.app, s.comm, s.ranks, format_procs(s.problem), format_cells(s.problem), s.problem.radius,
      s.problem.fields, s.problem.iterations, s.problem.compute_us, s.iteration_us_min, s.iteration_us_median,
      s.comm_share_percent, s.halo_bytes_per_s, s.mflops, s.checksum, s.analytic_relative_error,
      s.verified ? "true" : "false", json_escape(s.verification),
      s.png_path.empty() ? std::string("null") : fmt::format("\"{}\"", json_escape(s.png_path)),
      s.overlap ? "true" : "false", s.paired_speedup);
}

}  // namespace

double paired_speedup(std::span<const double> reference_rounds, std::span<const double> mode_rounds) {
  std::vector<double> ratios;
  for (std::size_t round = 0; round < reference_rounds.size() && round < mode_rounds.size(); ++round)
    if (mode_rounds[round] > 0) ratios.push_back(reference_rounds[round] / mode_rounds[round]);
  return ratios.empty() ? 1.0 : median_of(std::move(ratios));
}

RunSummary summarise(std::span<const RankReport> reports, const Problem& problem) {
  RunSummary summary;
  summary.problem = problem;
  summary.ranks = static_cast<int>(reports.size());
  std::vector<double> iteration_s, comm_share, paired;
  double halo_bytes = 0, max_error = 0, max_exact = 0;
  for (const RankReport& report : reports) {
    iteration_s.push_back(report.total_s / problem.iterations);
    comm_share.push_back(report.total_s > 0 ? report.comm_s / report.total_s : 0.0);
    paired.push_back(report.paired_speedup);
    halo_bytes += report.halo_bytes_per_iteration;
    summary.checksum += report.checksum;
    max_error = std::max(max_error, report.analytic_max_error);
    max_exact = std::max(max_exact, report.analytic_max_exact);
  }
  double median_s = median_of(iteration_s);
  summary.iteration_us_min = *std::min_element(iteration_s.begin(), iteration_s.end()) * 1e6;
  summary.iteration_us_median = median_s * 1e6;
  summary.comm_share_percent = median_of(comm_share) * 100.0;
  summary.paired_speedup = median_of(paired);
  double flops = static_cast<double>(total_cells(problem) * problem.fields * flops_per_cell(problem.radius, problem.dims));
  summary.halo_bytes_per_s = median_s > 0 ? halo_bytes / median_s : 0.0;
  summary.mflops = median_s > 0 ? flops / median_s / 1e6 : 0.0;
  summary.analytic_relative_error = max_exact > 0 ? max_error / max_exact : max_error;
  return summary;
}

void require_identical_fields(std::span<RunSummary> summaries) {
  bool identical = std::all_of(summaries.begin(), summaries.end(),
                               [&](const RunSummary& s) { return s.checksum == summaries[0].checksum; });
  if (identical) return;
  std::vector<std::string> checksums;
  for (const RunSummary& s : summaries) checksums.push_back(fmt::format("{} 0x{:016x}", s.comm, s.checksum));
  std::string finding = fmt::format("; the modes' fields differ ({})", fmt::join(checksums, ", "));
  for (RunSummary& s : summaries) {
    s.verified = false;
    s.verification += finding;
  }
}

std::string format_summary(const RunSummary& summary, OutputFormat format) {
  return format_summaries(std::span(&summary, 1), format);
}

std::string format_summaries(std::span<const RunSummary> summaries, OutputFormat format) {
  if (summaries.empty()) return {};
  std::string text;
  if (format == OutputFormat::json) {
    if (summaries.size() == 1) return format_json(summaries[0]);
    for (const RunSummary& s : summaries) {
      std::string object = format_json(s);
      object.pop_back();  // its newline
      text += (text.empty() ? "[" : ",\n ") + object;
    }
    return text + "]\n";
  }
  std::vector<std::string_view> names;
  for (const RunSummary& s : summaries) names.push_back(s.comm);
  text = format == OutputFormat::csv ? std::string(kCsvHeader) : table_header(summaries[0], fmt::format("{}", fmt::join(names, ",")));
  for (const RunSummary& s : summaries) text += format == OutputFormat::csv ? csv_row(s) : table_row(s);
  return text;
}

}  // namespace tether::apps
