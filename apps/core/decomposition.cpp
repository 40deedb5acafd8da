#include "apps/core/decomposition.hpp"

#include <unistd.h>

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "apps/core/block.hpp"

namespace tether::apps {
namespace {

// Spread of a candidate grid: how far its largest factor is from its smallest.
int spread(const Procs3& procs, int dims) {
  auto [smallest, largest] = std::minmax_element(procs.begin(), procs.begin() + dims);
  return *largest - *smallest;
}

bool better_grid(const Procs3& candidate, const Procs3& best, int dims) {
  int candidate_spread = spread(candidate, dims), best_spread = spread(best, dims);
  if (candidate_spread != best_spread) return candidate_spread < best_spread;
  // Ties: more ranks along z, then y. A face across y is whole rows and one across z whole
  // planes, copied as they lie in memory; a face across x is `radius` cells of every row.
  return std::tie(candidate[2], candidate[1]) > std::tie(best[2], best[1]);
}

}  // namespace

Procs3 balanced_process_grid(int ranks, int dims) {
  Procs3 best{ranks, 1, 1};
  for (int px = 1; px <= ranks; ++px) {
    if (ranks % px != 0) continue;
    int rest = ranks / px;
    for (int py = 1; py <= rest; ++py) {
      if (rest % py != 0) continue;
      int pz = rest / py;
      if (dims == 2 && pz != 1) continue;
      Procs3 candidate{px, py, pz};
      if (better_grid(candidate, best, dims)) best = candidate;
    }
  }
  return best;
}

Extent block_extent(std::int64_t cells, int parts, int index) {
  std::int64_t base = cells / parts, extra = cells % parts;
  std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, base + (index < extra ? 1 : 0)};
}

Procs3 coords_of(int rank, const Procs3& procs) {
  return {rank % procs[0], (rank / procs[0]) % procs[1], rank / (procs[0] * procs[1])};
}

int rank_at(const Procs3& coords, const Procs3& procs) {
  for (int axis = 0; axis < kMaxDims; ++axis) {
    if (coords[axis] < 0 || coords[axis] >= procs[axis]) return -1;
  }
  return coords[0] + procs[0] * (coords[1] + procs[1] * coords[2]);
}

int neighbour_across(int rank, int face, const Procs3& procs) {
  Procs3 coords = coords_of(rank, procs);
  coords[face_axis(face)] += face_is_high(face) ? 1 : -1;
  return rank_at(coords, procs);
}

std::string format_cells(const Problem& problem) {
  if (problem.dims == 2) return fmt::format("{}x{}", problem.global_cells[0], problem.global_cells[1]);
  return fmt::format("{}x{}x{}", problem.global_cells[0], problem.global_cells[1], problem.global_cells[2]);
}

std::string format_procs(const Problem& problem) {
  if (problem.dims == 2) return fmt::format("{}x{}", problem.procs[0], problem.procs[1]);
  return fmt::format("{}x{}x{}", problem.procs[0], problem.procs[1], problem.procs[2]);
}

namespace {

// A rank's two copies of its widest block (cells, ghosts and row padding, every field), in
// bytes; a double, so grids past 2^64 bytes compare too.
double block_bytes(const Problem& problem) {
  double cells = 1;
  for (int axis = 0; axis < kMaxDims; ++axis) {
    std::int64_t widest = (problem.global_cells[axis] + problem.procs[axis] - 1) / problem.procs[axis];
    std::int64_t ghosts = axis < problem.dims ? 2 * problem.radius : 0;
    cells *= static_cast<double>(widest + ghosts + (axis == 0 ? 2 * kDoublesPerLine : 0));
  }
  return cells * problem.fields * static_cast<double>(sizeof(double)) * 2;
}

double physical_memory_bytes() {
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

Expected<void> refuse_blocks_past_memory(const Problem& problem) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  double needed = block_bytes(problem), memory = physical_memory_bytes();
  if (needed <= memory) return {};
  return make_error(Errc::invalid_argument,
                    fmt::format("a rank's block of grid {} over {} ranks, with {} fields, needs {:.3g} GiB, more "
                                "than this node's {:.3g} GiB",
                                format_cells(problem), format_procs(problem), problem.fields, needed / kGiB,
                                memory / kGiB),
                    "use a smaller grid, fewer --fields, or more ranks");
}

}  // namespace

Expected<void> validate(const Problem& problem, int ranks) {
  if (total_ranks(problem.procs) != ranks) {
    return make_error(Errc::invalid_argument,
                      fmt::format("process grid {} holds {} ranks but the job has {}",
                                  format_procs(problem), total_ranks(problem.procs), ranks),
                      "pass --procs with a product equal to the rank count, or leave it out");
  }
  for (int axis = 0; axis < problem.dims; ++axis) {
    std::int64_t narrowest = problem.global_cells[axis] / problem.procs[axis];
    if (narrowest < problem.radius) {
      return make_error(Errc::invalid_argument,
                        fmt::format("axis {} has {} cells over {} ranks: a block of {} cells is "
                                    "narrower than the radius {}",
                                    "xyz"[axis], problem.global_cells[axis], problem.procs[axis],
                                    narrowest, problem.radius),
                        "use a larger grid, fewer ranks along that axis, or a smaller --radius");
    }
  }
  return refuse_blocks_past_memory(problem);
}

}  // namespace tether::apps
