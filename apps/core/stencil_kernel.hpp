// The stencil's loops. Include only from stencil.cpp (the baseline copy), stencil_avx2.cpp
// and stencil_avx512.cpp, which define TETHER_STENCIL_TARGET as their target attribute
// first (each copy runs only where the CPU has its instructions). stencil_avx512.cpp also
// defines TETHER_STENCIL_WIDE_ROWS, kWideRowsAtOnce and wide_rows_cells<Dims, Radius, Rows>(),
// which computes that many neighbouring rows' cells eight at a time up to the last whole
// eight and returns how many it did; the loop below finishes the rows. Only the functions below carry the
// attribute, and the unnamed namespace gives each file its own copy of them; whatever
// they call and do not inline (Block's accessors, std::vector) stays baseline code, so
// no AVX2 instruction can reach a caller on a CPU without it.
#pragma once

#include <cmath>
#include <cstdint>

#include "apps/core/block.hpp"
#include "apps/core/stencil.hpp"

#ifndef TETHER_STENCIL_TARGET
#define TETHER_STENCIL_TARGET
#endif

namespace tether::apps {
namespace {

// Cells `from` .. `count` of one row along x; R and the dimension count are compile-time for
// the common radii so the loop vectorises.
template <int Dims, int Radius>
TETHER_STENCIL_TARGET void stencil_row_from(const double* in, double* out, std::int64_t from, std::int64_t count,
                                            std::int64_t stride_y, std::int64_t stride_z, const double* c,
                                            int radius) {
  const int reach = Radius > 0 ? Radius : radius;
  for (std::int64_t x = from; x < count; ++x) {
    double sum = c[0] * in[x];
    for (int k = 1; k <= reach; ++k) {
      double pairs = (in[x - k] + in[x + k]) + (in[x - k * stride_y] + in[x + k * stride_y]);
      if constexpr (Dims == 3) pairs += in[x - k * stride_z] + in[x + k * stride_z];
      sum = std::fma(c[k], pairs, sum);  // one rounding: every copy gets the same bits
    }
    out[x] = sum;
  }
}

// How many neighbouring rows the stencil computes together (the wide copy shares their
// neighbours' loads); 1 where it cannot.
template <int Radius>
constexpr int rows_at_once() {
#if defined(TETHER_STENCIL_WIDE_ROWS)
  if (Radius >= 1 && Radius <= kWideRowMaxRadius) return kWideRowsAtOnce;
#endif
  return 1;
}

// `Rows` rows along y from `row` (x = cells.lo[0]): the wide copy's whole eights, then the
// rest of each row, then the x ghosts of each row that reaches a global edge.
template <int Dims, int Radius, int Rows>
TETHER_STENCIL_TARGET void stencil_rows(Block& block, const double* in, double* out, std::size_t row,
                                        std::int64_t count, const double* c, int radius, bool low, bool high) {
  const std::int64_t stride_y = block.stride_y();
  std::int64_t done = 0;
#if defined(TETHER_STENCIL_WIDE_ROWS)
  if constexpr (Radius >= 1 && Radius <= kWideRowMaxRadius)
    done = wide_rows_cells<Dims, Radius, Rows>(in + row, out + row, count, stride_y, block.stride_z(), c);
#endif
  for (int r = 0; r < Rows; ++r) {
    const std::size_t at = row + static_cast<std::size_t>(r * stride_y);
    stencil_row_from<Dims, Radius>(in + at, out + at, done, count, stride_y, block.stride_z(), c, radius);
    if (low) Block::reflect_row_across_x(out + at, radius, false);
    if (high) Block::reflect_row_across_x(out + at + count, radius, true);
  }
}

// The rows of `cells` (owned cells, not empty) in one field, and the x ghosts of each
// written row that reaches a global edge in `edges`.
template <int Dims, int Radius>
TETHER_STENCIL_TARGET void stencil_field(Block& block, int field, const double* c, int radius, const Box& cells,
                                         XEdges edges) {
  constexpr int kRows = rows_at_once<Radius>();
  const double* in = block.current(field);
  double* out = block.next(field);
  const std::int64_t count = cells.hi[0] - cells.lo[0];
  const bool low = edges.low && cells.lo[0] == 0;
  const bool high = edges.high && cells.hi[0] == block.extent()[0];
  for (std::int64_t z = cells.lo[2]; z < cells.hi[2]; ++z) {
    std::int64_t y = cells.lo[1];
    for (; y + kRows <= cells.hi[1]; y += kRows)
      stencil_rows<Dims, Radius, kRows>(block, in, out, block.index(cells.lo[0], y, z), count, c, radius, low, high);
    for (; y < cells.hi[1]; ++y)
      stencil_rows<Dims, Radius, 1>(block, in, out, block.index(cells.lo[0], y, z), count, c, radius, low, high);
  }
}

template <int Dims>
TETHER_STENCIL_TARGET void stencil_field_any_radius(Block& block, int field, const double* c, int radius,
                                                    const Box& cells, XEdges edges) {
  switch (radius) {
    case 1: return stencil_field<Dims, 1>(block, field, c, radius, cells, edges);
    case 2: return stencil_field<Dims, 2>(block, field, c, radius, cells, edges);
    case 3: return stencil_field<Dims, 3>(block, field, c, radius, cells, edges);
    default: return stencil_field<Dims, 0>(block, field, c, radius, cells, edges);
  }
}

[[maybe_unused]] TETHER_STENCIL_TARGET void apply_stencil_fields(Block& block, int dims, const StencilWeights& weights,
                                                                 const Box& cells, XEdges edges) {
  if (cells.cells() <= 0) return;
  const int radius = static_cast<int>(weights.c.size()) - 1;
  for (int field = 0; field < block.fields(); ++field) {
    if (dims == 3) stencil_field_any_radius<3>(block, field, weights.c.data(), radius, cells, edges);
    else stencil_field_any_radius<2>(block, field, weights.c.data(), radius, cells, edges);
  }
}

}  // namespace


}  // namespace tether::apps
