#include "apps/core/halo_app.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
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

// The serial reference's checksum where the verify mode asks for it (rank 0, once per run).
std::optional<std::uint64_t> serial_reference(const AppOptions& options, const Problem& problem) {
  bool serial = options.verify == VerifyMode::serial ||
                (options.verify == VerifyMode::automatic && serial_reference_is_cheap(problem));
  if (!serial) return std::nullopt;
  return serial_reference_checksum(problem);
}

// Refuses a checked run so long that the field decays below kSmallestCheckedAmplitude, to
// subnormal numbers and zeros: there a wrong field matches the analytic solution and can
// equal the serial reference bit for bit (both all zero), so no check could fail.
Expected<void> check_field_outlives_run(const AppOptions& options, const Problem& problem) {
  std::int64_t most = most_analytic_iterations(problem);
  if (options.verify == VerifyMode::none || problem.iterations <= most) return {};
  return make_error(Errc::invalid_argument,
                    fmt::format("after {} iterations the field decays below {:.1e} (subnormal numbers and zeros), "
                                "where no check can tell a wrong field from a right one",
                                problem.iterations, kSmallestCheckedAmplitude),
                    fmt::format("run at most {} iterations on this grid, a larger grid, or --verify none", most));
}

// Rank 0's verdict on one mode: the serial reference (`serial_checksum`, when asked for)
// and/or the analytic check.
void judge(RunSummary& summary, const AppOptions& options, std::optional<std::uint64_t> serial_checksum) {
  const Problem& problem = summary.problem;
  bool analytic = options.verify == VerifyMode::analytic || options.verify == VerifyMode::automatic;
  std::vector<std::string> findings;
  summary.verified = true;
  if (serial_checksum) {
    std::uint64_t reference = *serial_checksum;
    bool same = reference == summary.checksum;
    summary.verified = summary.verified && same;
    findings.push_back(same ? fmt::format("bitwise equal to the serial reference (checksum 0x{:016x})", reference)
                            : fmt::format("differs from the serial reference (checksum 0x{:016x}, serial 0x{:016x})",
                                          summary.checksum, reference));
  }
  if (analytic) {  // check_field_outlives_run keeps the exact solution above the floor
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

// Rank 0 checks --png's path before the run and tells every rank.
Expected<void> check_png_path_first(CommBackend& group, const std::string& path) {
  if (path.empty()) return {};
  Expected<void> writable;
  std::uint8_t ok = 1;
  if (group.rank() == 0) {
    writable = png_path_writable(path);
    ok = writable ? 1 : 0;
  }
  if (auto shared = group.broadcast_from_root(std::as_writable_bytes(std::span<std::uint8_t>(&ok, 1))); !shared)
    return tl::unexpected(shared.error());
  if (ok == 0 && group.rank() != 0)
    return make_error(Errc::invalid_argument, "rank 0 cannot write the --png file", "see rank 0's error");
  return writable;
}

void print_results(const std::vector<RunSummary>& summaries, const AppOptions& options) {
  std::string text = format_summaries(summaries, options.format);
  if (options.format == OutputFormat::table) {
    for (const RunSummary& summary : summaries) {
      std::string mode = summaries.size() > 1 ? summary.comm + ": " : "";
      text += summary.verified ? fmt::format("verified: {}{}\n", mode, summary.verification)
                               : fmt::format("NOT verified: {}{}\n", mode, summary.verification);
    }
    if (!summaries[0].png_path.empty()) text += fmt::format("png: heat map written to {}\n", summaries[0].png_path);
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  for (const RunSummary& summary : summaries)
    if (!summary.verified && options.verify != VerifyMode::none)
      log::error("apps", "{} --comm {}: NOT verified: {}", options.app, summary.comm, summary.verification);
}

// One --comm mode of the run: its process group, its exchange, and this rank's fastest run.
struct ModeRun {
  std::string name;
  std::unique_ptr<CommBackend> backend;
  std::unique_ptr<HaloExchange> exchange;
  RankReport fastest{};
  bool ran = false;
  std::vector<double> round_seconds;  // this rank's time of each round, in order
};

// Every mode must see this process as the same rank of the same job.
Expected<void> check_modes_agree(const std::vector<ModeRun>& modes) {
  const CommBackend& first = *modes[0].backend;
  for (const ModeRun& mode : modes)
    if (mode.backend->rank() != first.rank() || mode.backend->size() != first.size())
      return make_error(Errc::invalid_argument,
                        fmt::format("--comm {} sees this process as rank {} of {}, --comm {} as rank {} of {}",
                                    modes[0].name, first.rank(), first.size(), mode.name, mode.backend->rank(),
                                    mode.backend->size()),
                        "run modes together under one launcher both understand (mpirun for tether and MPI modes)");
  return {};
}

Expected<void> create_exchanges(std::vector<ModeRun>& modes, const HaloPlan& plan) {
  for (ModeRun& mode : modes) {
    auto exchange = mode.backend->create_exchange(plan.pattern);
    if (!exchange) return tl::unexpected(exchange.error());
    mode.exchange = std::move(*exchange);
  }
  for (ModeRun& mode : modes)
    if (auto ready = mode.backend->barrier(); !ready) return ready;
  return {};
}

// One run of `mode` from the initial field; this rank keeps it if it is its fastest.
Expected<void> run_mode(ModeRun& mode, Block& block, const Problem& problem, const HaloPlan& plan,
                        const LoopSettings& settings) {
  fill_initial(block, problem);
  if (auto ready = mode.backend->barrier(); !ready) return ready;
  auto times = run_iterations(block, problem, plan, *mode.exchange, settings);
  if (!times) return tl::unexpected(times.error());
  mode.round_seconds.push_back(times->total_s);
  if (!mode.ran || times->total_s < mode.fastest.total_s) {
    mode.fastest.total_s = times->total_s;
    mode.fastest.comm_s = times->comm_s;
    mode.fastest.compute_s = times->compute_s;
  }
  mode.ran = true;
  return {};
}

// Each mode against the first listed, round by round (RankReport::paired_speedup).
void pair_rounds(std::vector<ModeRun>& modes) {
  for (ModeRun& mode : modes) mode.fastest.paired_speedup = paired_speedup(modes[0].round_seconds, mode.round_seconds);
}

// The field `mode` left: its checksum and analytic error, for rank 0's verdict.
void record_field(ModeRun& mode, const Block& block, const Problem& problem, const HaloPlan& plan,
                  const AppOptions& options) {
  mode.fastest.halo_bytes_per_iteration = static_cast<double>(plan.halo_bytes_per_iteration);
  mode.fastest.checksum = field_checksum(block, problem);
  if (options.verify == VerifyMode::automatic || options.verify == VerifyMode::analytic) {
    AnalyticError error = analytic_error(block, problem, stencil_weights(problem.radius, problem.dims));
    mode.fastest.analytic_max_error = error.max_error;
    mode.fastest.analytic_max_exact = error.max_exact;
  }
}

// Everything after the modes are up: the first mode's process group holds the collectives.
// Returns the exit code.
int run_with_backends(AppOptions& options, std::vector<ModeRun>& modes) {
  CommBackend& group = *modes[0].backend;
  log::set_rank(group.rank());
  if (auto agreed = check_modes_agree(modes); !agreed) return report_error(options, agreed.error(), kExitSetup);
  auto resolved = resolve_problem(options, group.size());
  if (!resolved) return group.rank() == 0 ? report_error(options, resolved.error(), kExitSetup) : kExitSetup;
  if (auto reach = check_field_outlives_run(options, *resolved); !reach)
    return group.rank() == 0 ? report_error(options, reach.error(), kExitSetup) : kExitSetup;
  if (auto checked = check_png_path_first(group, options.png_path); !checked)
    return group.rank() == 0 ? report_error(options, checked.error(), kExitSetup) : kExitSetup;
  const Problem& problem = *resolved;
  Block block(problem, group.rank());
  HaloPlan plan = make_halo_plan(block, problem, group.rank());
  if (auto created = create_exchanges(modes, plan); !created) {  // may fail on one rank: end them all
    (void)report_error(options, created.error(), kExitSetup);
    group.abort_job(kExitSetup);
  }

  LoopSettings settings{options.fault, group.rank() == (group.size() > 1 ? 1 : 0), options.overlap};
  // Each round starts one mode later, so no mode always runs first (or right after
  // another): at n=8000 on 4 ranks the modes' fastest rounds rose with their place.
  for (int round = 0; round < options.rounds; ++round) {
    for (std::size_t turn = 0; turn < modes.size(); ++turn) {
      ModeRun& mode = modes[(turn + static_cast<std::size_t>(round)) % modes.size()];
      if (auto ran = run_mode(mode, block, problem, plan, settings); !ran) {
        (void)report_error(options, ran.error(), kExitRun);
        mode.backend->abort_job(kExitRun);
      }
      if (round == options.rounds - 1) record_field(mode, block, problem, plan, options);
    }
  }
  pair_rounds(modes);
  for (ModeRun& mode : modes) mode.exchange.reset();  // persistent requests go before the process groups do

  std::vector<RunSummary> summaries;
  std::optional<std::uint64_t> serial_checksum;
  if (group.rank() == 0) serial_checksum = serial_reference(options, problem);
  for (ModeRun& mode : modes) {
    auto gathered = group.gather_to_root(bytes_of(mode.fastest));
    if (!gathered) return report_error(options, gathered.error(), kExitRun);
    if (group.rank() != 0) continue;
    std::vector<RankReport> reports(gathered->size() / sizeof(RankReport));
    std::memcpy(reports.data(), gathered->data(), gathered->size());
    RunSummary summary = summarise(reports, problem);
    summary.app = options.app;
    summary.comm = mode.name;
    summary.overlap = options.overlap;
    judge(summary, options, serial_checksum);
    summaries.push_back(std::move(summary));
  }
  std::uint8_t verified = 0;
  if (group.rank() == 0) {
    require_identical_fields(summaries);
    verified = std::all_of(summaries.begin(), summaries.end(), [](const RunSummary& s) { return s.verified; }) ? 1 : 0;
  }
  if (auto shared = group.broadcast_from_root(std::as_writable_bytes(std::span<std::uint8_t>(&verified, 1))); !shared)
    return report_error(options, shared.error(), kExitRun);

  Expected<void> drawn;
  if (!options.png_path.empty()) drawn = draw_heatmap(group, block, problem, options.png_path);
  for (RunSummary& summary : summaries) summary.png_path = drawn ? options.png_path : "";
  if (group.rank() == 0) print_results(summaries, options);  // the run's results stand without the picture
  bool accepted = verified == 1 || options.verify == VerifyMode::none;
  if (!drawn) (void)report_error(options, drawn.error(), kExitSetup);
  if (!accepted) return kExitNotVerified;  // a failed picture never hides a failed check
  return drawn ? 0 : kExitSetup;
}

// The modes --comm lists, each known and listed once; nothing is started yet.
Expected<std::vector<const CommMode*>> listed_modes(std::string_view list) {
  std::vector<const CommMode*> modes;
  std::size_t begin = 0;
  for (;;) {
    std::size_t comma = list.find(',', begin);
    std::string_view name = list.substr(begin, comma == std::string_view::npos ? comma : comma - begin);
    if (name.empty())
      return make_error(Errc::invalid_argument, fmt::format("--comm {} has an empty mode", list),
                        "give one mode, or several separated by single commas");
    auto mode = find_comm_mode(name);
    if (!mode) return tl::unexpected(mode.error());
    if (std::find(modes.begin(), modes.end(), *mode) != modes.end())
      return make_error(Errc::invalid_argument, fmt::format("--comm {} lists {} twice", list, name),
                        "list each mode once (--rounds runs them again)");
    modes.push_back(*mode);
    if (comma == std::string_view::npos) return modes;
    begin = comma + 1;
  }
}

// Starts every mode --comm lists, in order.
Expected<std::vector<ModeRun>> start_modes(const std::string& list, int& argc, char**& argv) {
  auto listed = listed_modes(list);
  if (!listed) return tl::unexpected(listed.error());
  std::vector<ModeRun> modes;
  for (const CommMode* mode : *listed) {
    auto backend = mode->start(argc, argv);
    if (!backend) return tl::unexpected(backend.error());
    modes.push_back(ModeRun{std::string(mode->name), std::move(*backend), nullptr, {}, false, {}});
  }
  return modes;
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
  auto modes = start_modes(options.comm, argc, argv);
  if (!modes) return report_error(options, modes.error(), kExitSetup);
  int exit_code = run_with_backends(options, *modes);
  for (ModeRun& mode : *modes) mode.exchange.reset();  // an early return may leave them: they go first
  for (auto mode = modes->rbegin(); mode != modes->rend(); ++mode)
    if (auto finished = mode->backend->finish(); !finished) return report_error(options, finished.error(), kExitRun);
  return exit_code;
}

}  // namespace tether::apps
