// What one halo run computes: the global grid, how it is split over ranks, the stencil
// radius, the number of fields and iterations. Shared by halo2d and halo3d.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tether/error.hpp"

namespace tether::apps {

inline constexpr int kMaxDims = 3;
using Cells3 = std::array<std::int64_t, kMaxDims>;  // x, y, z; z = 1 in 2D
using Procs3 = std::array<int, kMaxDims>;           // x, y, z; z = 1 in 2D

struct Problem {
  int dims = 2;                 // 2 (halo2d) or 3 (halo3d)
  Cells3 global_cells{1, 1, 1};
  Procs3 procs{1, 1, 1};
  int radius = 2;               // star stencil reaches this many cells along each axis
  int fields = 1;               // independent fields per cell, exchanged in one message
  int iterations = 100;
  double compute_us = 0;        // extra arithmetic per iteration, to weigh compute vs comm
};

[[nodiscard]] inline std::int64_t total_cells(const Problem& problem) {
  return problem.global_cells[0] * problem.global_cells[1] * problem.global_cells[2];
}

[[nodiscard]] inline std::int64_t total_ranks(const Procs3& procs) {
  return std::int64_t{procs[0]} * procs[1] * procs[2];
}

// "256x256" or "64x64x64".
[[nodiscard]] std::string format_cells(const Problem& problem);
[[nodiscard]] std::string format_procs(const Problem& problem);

// Checks that every rank's block is at least `radius` cells wide along each axis (the
// halo comes from the nearest neighbour only) and that the process grid fits `ranks`.
[[nodiscard]] Expected<void> validate(const Problem& problem, int ranks);

}  // namespace tether::apps
