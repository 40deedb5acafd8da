// tether-bench-stencil: one halo2d iteration's compute on one rank's 2-rank share of the
// n=256 grid (256 x 128 cells, radius 2), per stencil copy, beside the edge reflections.
// The copies give the same bits (HaloStencilTest); their ratio is what the vector units buy,
// and the reflections are every --comm mode's shared cost besides the stencil.
// Run: tether-bench-stencil --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "apps/core/block.hpp"
#include "apps/core/stencil.hpp"

namespace {

using tether::apps::Block;
using StencilCopy = void (*)(Block&, int, const tether::apps::StencilWeights&, const tether::apps::Box&);

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
    copy(block, problem.dims, weights, block.owned_box());
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

// The four edges' ghosts of the same block (what a rank with no neighbour fills).
void edge_reflections(benchmark::State& state) {
  tether::apps::Problem problem = two_rank_share();
  Block block(problem, 0);
  tether::apps::fill_initial(block, problem);
  for (auto _ : state) {
    for (int face = 0; face < 2 * problem.dims; ++face) block.reflect_at_edge(face);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(edge_reflections);

}  // namespace

BENCHMARK_MAIN();
