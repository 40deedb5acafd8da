// Splitting the global grid over a process grid: "as square as possible" process grids,
// block ranges for sizes that do not divide evenly, and the neighbour of each face.
#pragma once

#include <cstdint>

#include "apps/core/problem.hpp"

namespace tether::apps {

// A half-open range of global cell indices along one axis.
struct Extent {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

// The most balanced process grid for `ranks` in `dims` dimensions (largest factor on x).
[[nodiscard]] Procs3 balanced_process_grid(int ranks, int dims);

// Block `index` of `parts` over `cells`: the first cells % parts blocks get one extra cell.
[[nodiscard]] Extent block_extent(std::int64_t cells, int parts, int index);

// Rank numbering: x fastest, then y, then z.
[[nodiscard]] Procs3 coords_of(int rank, const Procs3& procs);
[[nodiscard]] int rank_at(const Procs3& coords, const Procs3& procs);

// Faces: face = 2 * axis + side, side 0 = low, 1 = high. 2D uses faces 0-3, 3D 0-5.
inline constexpr int kMaxFaces = 2 * kMaxDims;
[[nodiscard]] constexpr int face_axis(int face) { return face / 2; }
[[nodiscard]] constexpr bool face_is_high(int face) { return face % 2 == 1; }
[[nodiscard]] constexpr int opposite_face(int face) { return face ^ 1; }

// The rank across `face` of `rank`, or -1 at the edge of the global grid (no wrap).
[[nodiscard]] int neighbour_across(int rank, int face, const Procs3& procs);

}  // namespace tether::apps
