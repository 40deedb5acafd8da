#include "apps/core/halo_app.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "apps/comm/registry.hpp"
#include "apps/core/heatmap.hpp"
#include "apps/core/stencil.hpp"
#include "apps/core/verify.hpp"
#include "runtime/base/log.hpp"

namespace tether::apps {
namespace {

constexpr int kExitNotVerified = 1;
constexpr int kExitSetup = 2;
constexpr int kExitRun = 3;

static_assert(std::is_trivially_copyable_v<RankReport>);

int report_error(const AppOptions& options, const Error& error, int exit_code) {
  log::error("apps", "{}: {}", options.app, error.message());
  return exit_code;
}

// The process grid and global grid once the rank count is known.
Expected<Problem> resolve_problem(const AppOptions& options, int ranks) {
  Problem problem = options.problem;
  if (!options.procs_given) problem.procs = balanced_process_grid(ranks, problem.dims);
  if (options.cells_are_per_rank && total_ranks(problem.procs) == ranks) {
    for (int axis = 0; axis < kMaxDims; ++axis) problem.global_cells[axis] *= problem.procs[axis];
  }
  if (auto valid = validate(problem, ranks); !valid) return tl::unexpected(valid.error());
  return problem;
}

template <class T>
std::span<const std::byte> bytes_of(const T& value) {
  return std::as_bytes(std::span<const T>(&value, 1));
}

// Rank 0's verdict: the serial reference and/or the analytic check.
void judge(RunSummary& summary, const AppOptions& options) {
  const Problem& problem = summary.problem;
  bool serial = options.verify == VerifyMode::serial ||
                (options.verify == VerifyMode::automatic && serial_reference_is_cheap(problem));
  bool analytic = options.verify == VerifyMode::analytic || options.verify == VerifyMode::automatic;
  std::vector<std::string> findings;
  summary.verified = true;
  if (serial) {
    std::uint64_t reference = serial_reference_checksum(problem);
    bool same = reference == summary.checksum;
    summary.verified = summary.verified && same;
    findings.push_back(same ? fmt::format("bitwise equal to the serial reference (checksum 0x{:016x})", reference)
                            : fmt::format("differs from the serial reference (checksum 0x{:016x}, serial 0x{:016x})",
                                          summary.checksum, reference));
  }
  if (analytic) {
    double tolerance = analytic_tolerance(problem);
    bool close = summary.analytic_relative_error <= tolerance;
    summary.verified = summary.verified && close;
    findings.push_back(fmt::format("analytic solution {} (relative error {:.2e}, tolerance {:.1e})",
                                   close ? "matches" : "does NOT match", summary.analytic_relative_error, tolerance));
  }
  if (findings.empty()) {
    summary.verified = false;
    findings.push_back("verification skipped (--verify none)");
  }
  summary.verification = fmt::format("{}", fmt::join(findings, "; "));
}

Expected<void> draw_heatmap(CommBackend& backend, const Block& block, const Problem& problem, const std::string& path) {
  std::vector<double> mine = sample_heatmap(block, problem);
  auto gathered = backend.gather_to_root(std::as_bytes(std::span<const double>(mine)));
  if (!gathered) return tl::unexpected(gathered.error());
  if (backend.rank() != 0) return {};
  std::vector<double> all(gathered->size() / sizeof(double));
  std::memcpy(all.data(), gathered->data(), gathered->size());
  return write_heatmap_png(path, merge_heatmaps(all, mine.size()), heatmap_size(problem));
}

void print_results(const RunSummary& summary, const AppOptions& options) {
  std::string text = format_summary(summary, options.format);
  if (options.format == OutputFormat::table) {
    text += summary.verified ? fmt::format("verified: {}\n", summary.verification)
                             : fmt::format("NOT verified: {}\n", summary.verification);
    if (!summary.png_path.empty()) text += fmt::format("png: heat map written to {}\n", summary.png_path);
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (!summary.verified && options.verify != VerifyMode::none)
    log::error("apps", "{}: NOT verified: {}", options.app, summary.verification);
}

// Everything after the backend is up. Returns the exit code.
int run_with_backend(AppOptions& options, CommBackend& backend) {
  log::set_rank(backend.rank());
  auto resolved = resolve_problem(options, backend.size());
  if (!resolved) return backend.rank() == 0 ? report_error(options, resolved.error(), kExitSetup) : kExitSetup;
  const Problem& problem = *resolved;
  Block block(problem, backend.rank());
  fill_initial(block, problem);
  HaloPlan plan = make_halo_plan(block, problem, backend.rank());
  auto exchange = backend.create_exchange(plan.pattern);
  if (!exchange) return report_error(options, exchange.error(), kExitSetup);
  if (auto ready = backend.barrier(); !ready) return report_error(options, ready.error(), kExitSetup);

  LoopSettings settings{options.fault, backend.rank() == (backend.size() > 1 ? 1 : 0), options.overlap};
  auto times = run_iterations(block, problem, plan, **exchange, settings);
  if (!times) {
    (void)report_error(options, times.error(), kExitRun);
    backend.abort_job(kExitRun);
  }
  exchange->reset();  // persistent requests go before the process group does

  RankReport mine{times->total_s, times->comm_s, times->compute_s, static_cast<double>(plan.halo_bytes_per_iteration),
                  field_checksum(block, problem), 0, 0};
  if (options.verify == VerifyMode::automatic || options.verify == VerifyMode::analytic) {
    AnalyticError error = analytic_error(block, problem, stencil_weights(problem.radius, problem.dims));
    mine.analytic_max_error = error.max_error;
    mine.analytic_max_exact = error.max_exact;
  }
  auto gathered = backend.gather_to_root(bytes_of(mine));
  if (!gathered) return report_error(options, gathered.error(), kExitRun);

  RunSummary summary;
  std::uint8_t verified = 0;
  if (backend.rank() == 0) {
    std::vector<RankReport> reports(gathered->size() / sizeof(RankReport));
    std::memcpy(reports.data(), gathered->data(), gathered->size());
    summary = summarise(reports, problem);
    summary.app = options.app;
    summary.comm = options.comm;
    summary.overlap = options.overlap;
    judge(summary, options);
    verified = summary.verified ? 1 : 0;
  }
  if (auto shared = backend.broadcast_from_root(std::as_writable_bytes(std::span<std::uint8_t>(&verified, 1))); !shared)
    return report_error(options, shared.error(), kExitRun);

  if (!options.png_path.empty()) {
    if (auto drawn = draw_heatmap(backend, block, problem, options.png_path); !drawn)
      return report_error(options, drawn.error(), kExitSetup);
    summary.png_path = options.png_path;
  }
  if (backend.rank() == 0) print_results(summary, options);
  bool accepted = verified == 1 || options.verify == VerifyMode::none;
  return accepted ? 0 : kExitNotVerified;
}

}  // namespace

int run_halo_app(AppOptions& options, const std::vector<ArgumentSpec>& specs, int argc, char** argv) {
  auto parsed = parse_arguments(argc, argv, specs);
  if (!parsed) return report_error(options, parsed.error(), kExitSetup);
  if (!*parsed) {
    std::fputs(usage_text(options.app, options.summary, specs).c_str(), stdout);
    return 0;
  }
  if (options.comm.empty()) options.comm = std::string(default_comm_mode());
  auto mode = find_comm_mode(options.comm);
  if (!mode) return report_error(options, mode.error(), kExitSetup);
  auto backend = (*mode)->start(argc, argv);
  if (!backend) return report_error(options, backend.error(), kExitSetup);
  int exit_code = run_with_backend(options, **backend);
  if (auto finished = (*backend)->finish(); !finished) return report_error(options, finished.error(), kExitRun);
  return exit_code;
}

}  // namespace tether::apps
