// The stencil's loops. Include only from stencil.cpp (the baseline copy), stencil_avx2.cpp
// and stencil_avx512.cpp, which define TETHER_STENCIL_TARGET as their target attribute
// first (each copy runs only where the CPU has its instructions). stencil_avx512.cpp also
// defines TETHER_STENCIL_WIDE_ROWS and wide_row_cells<Dims, Radius>(), which computes a
// row's cells eight at a time up to the last whole eight and returns how many it did; the
// loop below finishes the row. Only the functions below carry the
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

// One row of cells along x; R and the dimension count are compile-time for the common
// radii so the inner loop vectorises.
template <int Dims, int Radius>
TETHER_STENCIL_TARGET void stencil_row(const double* in, double* out, std::int64_t count, std::int64_t stride_y,
                                       std::int64_t stride_z, const double* c, int radius) {
  const int reach = Radius > 0 ? Radius : radius;
  std::int64_t x = 0;
#if defined(TETHER_STENCIL_WIDE_ROWS)
  if constexpr (Radius >= 1 && Radius <= kWideRowMaxRadius)
    x = wide_row_cells<Dims, Radius>(in, out, count, stride_y, stride_z, c);
#endif
  for (; x < count; ++x) {
    double sum = c[0] * in[x];
    for (int k = 1; k <= reach; ++k) {
      double pairs = (in[x - k] + in[x + k]) + (in[x - k * stride_y] + in[x + k * stride_y]);
      if constexpr (Dims == 3) pairs += in[x - k * stride_z] + in[x + k * stride_z];
      sum = std::fma(c[k], pairs, sum);  // one rounding: every copy gets the same bits
    }
    out[x] = sum;
  }
}

// The rows of `cells` (owned cells, not empty) in one field, and the x ghosts of each
// written row that reaches a global edge in `edges`.
template <int Dims, int Radius>
TETHER_STENCIL_TARGET void stencil_field(Block& block, int field, const double* c, int radius, const Box& cells,
                                         XEdges edges) {
  const double* in = block.current(field);
  double* out = block.next(field);
  const std::int64_t count = cells.hi[0] - cells.lo[0];
  const bool low = edges.low && cells.lo[0] == 0;
  const bool high = edges.high && cells.hi[0] == block.extent()[0];
  for (std::int64_t z = cells.lo[2]; z < cells.hi[2]; ++z) {
    for (std::int64_t y = cells.lo[1]; y < cells.hi[1]; ++y) {
      std::size_t row = block.index(cells.lo[0], y, z);
      stencil_row<Dims, Radius>(in + row, out + row, count, block.stride_y(), block.stride_z(), c, radius);
      if (low) Block::reflect_row_across_x(out + row, radius, false);
      if (high) Block::reflect_row_across_x(out + row + count, radius, true);
    }
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
