// The stencil's AVX-512 copy (x86-64 builds): eight cells per instruction. A row's
// neighbours along x are not loaded again at every offset (each such load would straddle
// two cache lines): they are cut from the lines already loaded (valignq), so a vector of
// cells costs one load along x plus two per radius along each other axis. The operations
// per cell and their order are the baseline loop's, so the results stay bitwise equal.
#include <immintrin.h>

#include <cstdint>

#define TETHER_STENCIL_TARGET __attribute__((target("avx512f")))

namespace tether::apps {
namespace {

constexpr int kWideRowMaxRadius = 3;
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

// sum = fma(c[k], pairs along x + along y [+ along z], sum) at distance K, for the eight cells at
// `at`, whose line is `line` between `before` and `after`.
template <int Dims, int K>
TETHER_STENCIL_TARGET inline __m512d add_ring(__m512d sum, const double* at, __m512d before, __m512d line,
                                              __m512d after, std::int64_t stride_y, std::int64_t stride_z,
                                              __m512d weight) {
  __m512d pairs = _mm512_add_pd(_mm512_add_pd(lanes_from<kLanes - K>(before, line), lanes_from<K>(line, after)),
                                _mm512_add_pd(_mm512_loadu_pd(at - K * stride_y), _mm512_loadu_pd(at + K * stride_y)));
  if constexpr (Dims == 3)
    pairs = _mm512_add_pd(pairs, _mm512_add_pd(_mm512_loadu_pd(at - K * stride_z), _mm512_loadu_pd(at + K * stride_z)));
  return _mm512_fmadd_pd(weight, pairs, sum);
}

template <int Dims, int Radius>
TETHER_STENCIL_TARGET std::int64_t wide_row_cells(const double* in, double* out, std::int64_t count,
                                                  std::int64_t stride_y, std::int64_t stride_z, const double* c) {
  if (count < kLanes) return 0;
  __m512d weight[Radius + 1];
  for (int k = 0; k <= Radius; ++k) weight[k] = _mm512_set1_pd(c[k]);
  __m512d before = last_lanes(in, Radius);
  __m512d line = _mm512_loadu_pd(in);
  std::int64_t x = 0;
  for (; x + kLanes <= count; x += kLanes) {
    const double* at = in + x;
    // The next line holds this one's right neighbours: only its first Radius cells are
    // needed when it is the row's last.
    __m512d after = x + 2 * kLanes <= count ? _mm512_loadu_pd(at + kLanes) : first_lanes(at + kLanes, Radius);
    __m512d sum = _mm512_mul_pd(weight[0], line);
    sum = add_ring<Dims, 1>(sum, at, before, line, after, stride_y, stride_z, weight[1]);
    if constexpr (Radius >= 2) sum = add_ring<Dims, 2>(sum, at, before, line, after, stride_y, stride_z, weight[2]);
    if constexpr (Radius >= 3) sum = add_ring<Dims, 3>(sum, at, before, line, after, stride_y, stride_z, weight[3]);
    _mm512_storeu_pd(out + x, sum);
    before = line;
    line = after;
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
