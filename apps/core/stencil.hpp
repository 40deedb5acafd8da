// The star stencil of radius R in 2 or 3 dimensions, its initial field (a sum of two
// sine modes per field) and the exact answer after t iterations (each mode scales by
// its eigenvalue), used for the analytic check on grids too big for a serial reference.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/core/block.hpp"
#include "apps/core/problem.hpp"

namespace tether::apps {

// new = c[0] * u + sum over k = 1..R of c[k] * (sum over axes of u[-k] + u[+k]).
// c[0] = 1/2 and the rest are positive with weight 1/k, so the weights sum to 1.
struct StencilWeights {
  std::vector<double> c;  // size radius + 1
};
[[nodiscard]] StencilWeights stencil_weights(int radius, int dims);

// Floating-point operations per cell update (adds and multiplies of the formula above).
[[nodiscard]] std::int64_t flops_per_cell(int radius, int dims);

// One iteration over the owned cells in `cells` (block.owned_box(): all) of every field:
// block.next = stencil(block.current). The order of operations per cell never depends
// on the decomposition, nor on how the cells are split into boxes, so every process grid
// computes bitwise-identical fields.
// Global edges across x (no neighbour there): the stencil also fills block.next's x ghosts
// of every row it writes that reaches such an edge, as Block::reflect_at_edge would, while
// the row's ends are in cache; the iteration that reads them needs no pass of its own. A box
// reaching such an edge must hold the radius - 1 cells next to it (make_halo_plan checks).
struct XEdges {
  bool low = false;
  bool high = false;
};
void apply_stencil(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges = {});
// apply_stencil picks one of three copies of the loops by the CPU. Each, for the test
// that compares them bit for bit: the baseline copy and, on x86-64 builds, the AVX2 and
// the AVX-512 copies (callable only where cpu_has_avx2_stencil() and
// cpu_has_avx512_stencil() say so).
void apply_stencil_baseline(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges);
#if defined(TETHER_APPS_STENCIL_X86)
void apply_stencil_avx2(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges);
void apply_stencil_avx512(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges);
#endif
[[nodiscard]] bool cpu_has_avx2_stencil() noexcept;
[[nodiscard]] bool cpu_has_avx512_stencil() noexcept;
// The copy apply_stencil runs on this CPU: "avx512", "avx2" or "baseline".
[[nodiscard]] const char* stencil_copy_name() noexcept;

// A sine mode: sin(pi * m_axis * (i + 1) / (n_axis + 1)) along each active axis.
struct Mode {
  Cells3 wavenumber{1, 1, 1};
  double amplitude = 1.0;
};
// The two modes that make up field `field`.
[[nodiscard]] std::vector<Mode> modes_of_field(int field, int dims);
// How much one iteration scales `mode`.
[[nodiscard]] double eigenvalue(const Mode& mode, const Problem& problem, const StencilWeights& weights);

// Fills the owned cells of every field with its modes (iteration 0).
void fill_initial(Block& block, const Problem& problem);

// Largest |computed - exact| over the owned cells after `iterations`, and the largest
// |exact| (the scale to compare the error with).
struct AnalyticError {
  double max_error = 0;
  double max_exact = 0;
};
[[nodiscard]] AnalyticError analytic_error(const Block& block, const Problem& problem,
                                           const StencilWeights& weights);

}  // namespace tether::apps
