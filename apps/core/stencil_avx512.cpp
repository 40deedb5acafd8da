// The stencil's AVX-512 copy (x86-64 builds): eight cells per instruction. A row's
// neighbours along x are not loaded again at every offset (each such load would straddle
// two cache lines): they are cut from the lines already loaded (valignq). Four rows are
// computed together, sharing their neighbours' lines along y (13.1 -> 10.4 us on the
// 256 x 128 block of tether-bench-stencil, best of 24 alternating runs; two rows 10.6).
// The operations per cell and their order are the baseline loop's, so the results stay
// bitwise equal.
#include <immintrin.h>

#include <cstdint>

#define TETHER_STENCIL_TARGET __attribute__((target("avx512f")))

namespace tether::apps {
namespace {

constexpr int kWideRowMaxRadius = 3;
constexpr int kWideRowsAtOnce = 4;
constexpr std::int64_t kLanes = 8;

// Lanes Shift .. Shift + 7 of the sixteen cells low, high. (The zero-masked form with
// every lane kept: GCC 12's plain _mm512_alignr_epi64 trips -Wmaybe-uninitialized.)
template <int Shift>
TETHER_STENCIL_TARGET inline __m512d lanes_from(__m512d low, __m512d high) {
  return _mm512_castsi512_pd(
      _mm512_maskz_alignr_epi64(0xFF, _mm512_castpd_si512(high), _mm512_castpd_si512(low), Shift));
}

// The first `lanes` cells at `from`; the others read as zero and are never touched.
TETHER_STENCIL_TARGET inline __m512d first_lanes(const double* from, int lanes) {
  return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << lanes) - 1u), from);
}

// The last `lanes` of the eight cells ending just before `end`.
TETHER_STENCIL_TARGET inline __m512d last_lanes(const double* end, int lanes) {
  return _mm512_maskz_loadu_pd(static_cast<__mmask8>(0xFFu << (kLanes - lanes)), end - kLanes);
}

// sum = fma(c[k], pairs along x + along y [+ along z], sum) at distance K for the eight cells
// at `at`, whose line is `line` between `before` and `after`; `below` and `above` are the
// lines K rows down and up (loaded once for every row of the block that needs them).
template <int Dims, int K>
TETHER_STENCIL_TARGET inline __m512d add_ring(__m512d sum, const double* at, __m512d before, __m512d line,
                                              __m512d after, __m512d below, __m512d above, std::int64_t stride_z,
                                              __m512d weight) {
  __m512d pairs = _mm512_add_pd(_mm512_add_pd(lanes_from<kLanes - K>(before, line), lanes_from<K>(line, after)),
                                _mm512_add_pd(below, above));
  if constexpr (Dims == 3)
    pairs = _mm512_add_pd(pairs, _mm512_add_pd(_mm512_loadu_pd(at - K * stride_z), _mm512_loadu_pd(at + K * stride_z)));
  return _mm512_fmadd_pd(weight, pairs, sum);
}

// `Rows` neighbouring rows (along y) at once, eight cells of each per step: the lines of
// rows y - Radius .. y + Rows - 1 + Radius are loaded once per step and shared by the rows
// that need them. Returns how many cells of each row it did (up to the last whole eight).
template <int Dims, int Radius, int Rows>
TETHER_STENCIL_TARGET std::int64_t wide_rows_cells(const double* in, double* out, std::int64_t count,
                                                   std::int64_t stride_y, std::int64_t stride_z, const double* c) {
  if (count < kLanes) return 0;
  __m512d weight[Radius + 1];
  for (int k = 0; k <= Radius; ++k) weight[k] = _mm512_set1_pd(c[k]);
  __m512d before[Rows];
  __m512d line[Rows];
  for (int r = 0; r < Rows; ++r) {
    before[r] = last_lanes(in + r * stride_y, Radius);
    line[r] = _mm512_loadu_pd(in + r * stride_y);
  }
  std::int64_t x = 0;
  for (; x + kLanes <= count; x += kLanes) {
    const double* at = in + x;
    // The next line holds a row's right neighbours: only its first Radius cells are
    // needed when it is the row's last.
    const bool last = x + 2 * kLanes > count;
    __m512d after[Rows];
    for (int r = 0; r < Rows; ++r)
      after[r] = last ? first_lanes(at + r * stride_y + kLanes, Radius) : _mm512_loadu_pd(at + r * stride_y + kLanes);
    // column[Radius + i] is row i's line, for i in -Radius .. Rows - 1 + Radius.
    __m512d column[Rows + 2 * Radius];
    for (int i = 0; i < Radius; ++i) {
      column[i] = _mm512_loadu_pd(at - (Radius - i) * stride_y);
      column[Radius + Rows + i] = _mm512_loadu_pd(at + (Rows + i) * stride_y);
    }
    for (int r = 0; r < Rows; ++r) column[Radius + r] = line[r];
    for (int r = 0; r < Rows; ++r) {
      const double* row_at = at + r * stride_y;
      const int centre = Radius + r;
      __m512d sum = _mm512_mul_pd(weight[0], line[r]);
      sum = add_ring<Dims, 1>(sum, row_at, before[r], line[r], after[r], column[centre - 1], column[centre + 1],
                              stride_z, weight[1]);
      if constexpr (Radius >= 2)
        sum = add_ring<Dims, 2>(sum, row_at, before[r], line[r], after[r], column[centre - 2], column[centre + 2],
                                stride_z, weight[2]);
      if constexpr (Radius >= 3)
        sum = add_ring<Dims, 3>(sum, row_at, before[r], line[r], after[r], column[centre - 3], column[centre + 3],
                                stride_z, weight[3]);
      _mm512_storeu_pd(out + r * stride_y + x, sum);
    }
    for (int r = 0; r < Rows; ++r) {
      before[r] = line[r];
      line[r] = after[r];
    }
  }
  return x;
}

}  // namespace
}  // namespace tether::apps

#define TETHER_STENCIL_WIDE_ROWS 1
#include "apps/core/stencil_kernel.hpp"

namespace tether::apps {

void apply_stencil_avx512(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges) {
  apply_stencil_fields(block, dims, weights, cells, edges);
}

}  // namespace tether::apps
