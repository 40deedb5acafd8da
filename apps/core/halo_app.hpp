// The main program shared by halo2d and halo3d: parse, start the --comm mode, run,
// verify, report, draw. Exit codes: 0 verified, 1 not verified, 2 bad input or set-up
// failure, 3 a failure during the run.
#pragma once

#include <string>
#include <vector>

#include "apps/core/arguments.hpp"
#include "apps/core/problem.hpp"
#include "apps/core/report.hpp"
#include "apps/core/solver.hpp"

namespace tether::apps {

enum class VerifyMode { automatic, serial, analytic, none };

struct AppOptions {
  std::string app;
  std::string summary;  // one line for --help
  Problem problem;
  bool procs_given = false;
  // halo3d: problem.global_cells holds cells per rank until the process grid is known.
  bool cells_are_per_rank = false;
  std::string comm;  // empty: the default mode; several, comma-separated, run in one job
  int rounds = 1;    // runs of every mode, taking turns; each rank keeps its fastest
  VerifyMode verify = VerifyMode::automatic;
  OutputFormat format = OutputFormat::table;
  std::string png_path;
  Fault fault = Fault::none;
  bool overlap = true;  // compute the interior while the halos travel
};

// Options both apps take (--iterations, --fields, --comm, --verify, --json, ...).
[[nodiscard]] std::vector<ArgumentSpec> common_arguments(AppOptions& options);
// --procs for a `dimensions`-D process grid (2 or 3).
[[nodiscard]] ArgumentSpec procs_argument(AppOptions& options, int dimensions);

// Parses argv against `specs`, then runs. Returns the process exit code.
[[nodiscard]] int run_halo_app(AppOptions& options, const std::vector<ArgumentSpec>& specs, int argc, char** argv);

}  // namespace tether::apps
