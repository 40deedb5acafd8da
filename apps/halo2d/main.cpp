// halo2d: a radius-R star stencil on an n x n grid of doubles over a 2D process grid,
// ghost zones of width R exchanged every iteration through the --comm mode.
#include <array>

#include <fmt/format.h>

#include "apps/core/halo_app.hpp"

using namespace tether;
using namespace tether::apps;

namespace {

// Axes --nx or --ny set: --n, wherever it comes, leaves them alone.
using AxesGiven = std::array<bool, 2>;

Expected<void> set_cells(Problem& problem, AxesGiven& given, int axis_begin, int axis_end, std::string_view option,
                         std::string_view text) {
  auto cells = parse_count(option, text, 1, std::int64_t{1} << 31);
  if (!cells) return tl::unexpected(cells.error());
  bool both = axis_end - axis_begin == 2;
  for (int axis = axis_begin; axis < axis_end; ++axis) {
    auto& axis_given = given[static_cast<std::size_t>(axis)];
    if (both && axis_given) continue;
    problem.global_cells[axis] = *cells;
    axis_given = axis_given || !both;
  }
  return {};
}

std::vector<ArgumentSpec> halo2d_arguments(AppOptions& options, AxesGiven& given) {
  Problem& problem = options.problem;
  std::vector<ArgumentSpec> specs = {
      {"--n", "N", "grid of N x N cells (default 1024)",
       [&](std::string_view v) { return set_cells(problem, given, 0, 2, "--n", v); }},
      {"--nx", "NX", "cells along x (overrides --n)",
       [&](std::string_view v) { return set_cells(problem, given, 0, 1, "--nx", v); }},
      {"--ny", "NY", "cells along y (overrides --n)",
       [&](std::string_view v) { return set_cells(problem, given, 1, 2, "--ny", v); }},
      {"--radius", "R", "stencil radius, also the ghost width (default 2)",
       [&](std::string_view v) -> Expected<void> {
         auto radius = parse_count("--radius", v, 1, 16);
         if (!radius) return tl::unexpected(radius.error());
         problem.radius = static_cast<int>(*radius);
         return {};
       }},
  };
  specs.push_back(procs_argument(options, 2));
  for (ArgumentSpec& spec : common_arguments(options)) specs.push_back(std::move(spec));
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  AppOptions options;
  options.app = "halo2d";
  options.summary = "2D star stencil of radius R with halo exchange every iteration";
  options.problem = Problem{2, {1024, 1024, 1}, {1, 1, 1}, 2, 1, 100, 0};
  AxesGiven given{};
  std::vector<ArgumentSpec> specs = halo2d_arguments(options, given);
  return run_halo_app(options, specs, argc, argv);
}
