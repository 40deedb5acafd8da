// tether-bench-stencil: one halo2d iteration's compute on one rank's 2-rank share of the
// n=256 grid (256 x 128 cells, radius 2), per stencil copy, and with the edges' ghosts
// filled by a pass of their own or as the stencil writes the rows. The copies give the same
// bits (HaloStencilTest); their ratio is what the vector units buy, and the edges are every
// --comm mode's shared cost besides the stencil.
// Run: tether-bench-stencil --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "apps/core/block.hpp"
#include "apps/core/stencil.hpp"

namespace {

using tether::apps::Block;
using StencilCopy = void (*)(Block&, int, const tether::apps::StencilWeights&, const tether::apps::Box&,
                             tether::apps::XEdges);

tether::apps::Problem two_rank_share() {
  tether::apps::Problem problem;
  problem.global_cells = {256, 128, 1};
  problem.radius = 2;
  return problem;
}

void run_copy(benchmark::State& state, StencilCopy copy, bool available) {
  if (!available) return state.SkipWithError("this CPU lacks the copy's instructions");
  tether::apps::Problem problem = two_rank_share();
  Block block(problem, 0);
  tether::apps::fill_initial(block, problem);
  auto weights = tether::apps::stencil_weights(problem.radius, problem.dims);
  for (auto _ : state) {
    copy(block, problem.dims, weights, block.owned_box(), tether::apps::XEdges{});
    block.swap_current_and_next();
  }
  state.SetItemsProcessed(state.iterations() * block.owned_cells());
}

// Named as the halo apps' `stencil=` header line names them.
void baseline(benchmark::State& state) { run_copy(state, tether::apps::apply_stencil_baseline, true); }
BENCHMARK(baseline);
#if defined(TETHER_APPS_STENCIL_X86)
void avx2(benchmark::State& state) {
  run_copy(state, tether::apps::apply_stencil_avx2, tether::apps::cpu_has_avx2_stencil());
}
void avx512(benchmark::State& state) {
  run_copy(state, tether::apps::apply_stencil_avx512, tether::apps::cpu_has_avx512_stencil());
}
BENCHMARK(avx2);
BENCHMARK(avx512);
#endif

// One rank's whole compute per iteration with no neighbour, both ways: the stencil, then a
// pass filling all four edges' ghosts (as before XEdges), against the stencil filling the
// x edges' ghosts as it writes each row, then the two y edges' ghost rows (now).
void iteration(benchmark::State& state, bool fuse_x_edges) {
  tether::apps::Problem problem = two_rank_share();
  Block block(problem, 0);
  tether::apps::fill_initial(block, problem);
  auto weights = tether::apps::stencil_weights(problem.radius, problem.dims);
  tether::apps::XEdges edges{fuse_x_edges, fuse_x_edges};
  for (auto _ : state) {
    for (int face = fuse_x_edges ? 2 : 0; face < 2 * problem.dims; ++face) block.reflect_at_edge(face);
    tether::apps::apply_stencil(block, problem.dims, weights, block.owned_box(), edges);
    block.swap_current_and_next();
  }
}
void stencil_then_edge_pass(benchmark::State& state) { iteration(state, false); }
void stencil_filling_x_edges(benchmark::State& state) { iteration(state, true); }
BENCHMARK(stencil_then_edge_pass);
BENCHMARK(stencil_filling_x_edges);

}  // namespace

BENCHMARK_MAIN();
