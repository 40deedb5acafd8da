// halo3d: a 7-point stencil (radius 1 by default) on a 3D process grid with nx x ny x nz
// cells per rank and F fields per cell, the halo-exchange motif with a compute knob.
#include <fmt/format.h>

#include "apps/core/halo_app.hpp"

using namespace tether;
using namespace tether::apps;

namespace {

// Which kind of size the command line gave: per-rank (--nx, --ny, --nz) or whole-grid
// (--global). Mixed, one would silently rescale or drop the other.
enum class SizesGiven { none, per_rank, global };

Expected<void> refuse_mixed_sizes(SizesGiven& given, SizesGiven now, std::string_view option) {
  if (given != SizesGiven::none && given != now)
    return make_error(Errc::invalid_argument,
                      fmt::format("{} with {}", option,
                                  now == SizesGiven::global ? "--nx/--ny/--nz (cells per rank)"
                                                            : "--global (the whole grid)"),
                      "give either --global XxYxZ or --nx/--ny/--nz, not both");
  given = now;
  return {};
}

Expected<void> set_rank_cells(AppOptions& options, SizesGiven& given, int axis, std::string_view option,
                              std::string_view text) {
  auto cells = parse_count(option, text, 1, std::int64_t{1} << 20);
  if (!cells) return tl::unexpected(cells.error());
  if (auto alone = refuse_mixed_sizes(given, SizesGiven::per_rank, option); !alone) return alone;
  options.problem.global_cells[axis] = *cells;
  options.cells_are_per_rank = true;
  return {};
}

std::vector<ArgumentSpec> halo3d_arguments(AppOptions& options, SizesGiven& given) {
  Problem& problem = options.problem;
  std::vector<ArgumentSpec> specs = {
      {"--nx", "NX", "cells per rank along x (default 32)",
       [&](std::string_view v) { return set_rank_cells(options, given, 0, "--nx", v); }},
      {"--ny", "NY", "cells per rank along y (default 32)",
       [&](std::string_view v) { return set_rank_cells(options, given, 1, "--ny", v); }},
      {"--nz", "NZ", "cells per rank along z (default 32)",
       [&](std::string_view v) { return set_rank_cells(options, given, 2, "--nz", v); }},
      {"--global", "XxYxZ", "the whole grid instead of per-rank sizes (need not divide evenly)",
       [&](std::string_view v) -> Expected<void> {
         auto shape = parse_shape("--global", v, 3, 1, std::int64_t{1} << 40);
         if (!shape) return tl::unexpected(shape.error());
         if (auto alone = refuse_mixed_sizes(given, SizesGiven::global, "--global"); !alone) return alone;
         problem.global_cells = {(*shape)[0], (*shape)[1], (*shape)[2]};
         options.cells_are_per_rank = false;
         return {};
       }},
      {"--radius", "R", "stencil radius (default 1: the 7-point stencil)",
       [&](std::string_view v) -> Expected<void> {
         auto radius = parse_count("--radius", v, 1, 16);
         if (!radius) return tl::unexpected(radius.error());
         problem.radius = static_cast<int>(*radius);
         return {};
       }},
  };
  specs.push_back(procs_argument(options, 3));
  for (ArgumentSpec& spec : common_arguments(options)) specs.push_back(std::move(spec));
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  AppOptions options;
  options.app = "halo3d";
  options.summary = "3D 7-point stencil, per-rank nx x ny x nz cells and F fields, optional compute time";
  options.problem = Problem{3, {32, 32, 32}, {1, 1, 1}, 1, 1, 20, 0};
  options.cells_are_per_rank = true;
  SizesGiven given = SizesGiven::none;
  std::vector<ArgumentSpec> specs = halo3d_arguments(options, given);
  return run_halo_app(options, specs, argc, argv);
}
