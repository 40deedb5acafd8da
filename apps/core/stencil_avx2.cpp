// The stencil's AVX2 copy (x86-64 builds): its rows run four cells per instruction.
#define TETHER_STENCIL_TARGET __attribute__((target("avx2,fma")))
#include "apps/core/stencil_kernel.hpp"

namespace tether::apps {

void apply_stencil_avx2(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges) {
  apply_stencil_fields(block, dims, weights, cells, edges);
}

}  // namespace tether::apps
