#include "apps/core/stencil.hpp"

#include <cmath>
#include <numbers>

#include "apps/core/stencil_kernel.hpp"

namespace tether::apps {
namespace {

double sine_of(std::int64_t wavenumber, std::int64_t global_index, std::int64_t cells) {
  return std::sin(std::numbers::pi * static_cast<double>(wavenumber) * static_cast<double>(global_index + 1) /
                  static_cast<double>(cells + 1));
}

// The sine factor of `mode` along `axis` for each owned cell of `block`.
std::vector<double> sine_table(const Block& block, const Problem& problem, const Mode& mode, int axis) {
  std::vector<double> table(static_cast<std::size_t>(block.extent()[axis]), 1.0);
  if (axis >= problem.dims) return table;
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = sine_of(mode.wavenumber[axis], block.offset()[axis] + static_cast<std::int64_t>(i),
                       problem.global_cells[axis]);
  }
  return table;
}

// visit(x, y, z, value of the field's modes scaled by `scale[mode]`) over owned cells.
template <class Visit>
void for_each_mode_value(const Block& block, const Problem& problem, int field,
                         const std::vector<double>& scale, Visit&& visit) {
  std::vector<Mode> modes = modes_of_field(field, problem.dims);
  std::vector<std::vector<double>> tables[kMaxDims];
  for (int axis = 0; axis < kMaxDims; ++axis)
    for (const Mode& mode : modes) tables[axis].push_back(sine_table(block, problem, mode, axis));
  Box owned{{0, 0, 0}, block.extent()};
  for_each_cell(owned, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    double value = 0;
    for (std::size_t m = 0; m < modes.size(); ++m) {
      double shape = tables[0][m][static_cast<std::size_t>(x)] * tables[1][m][static_cast<std::size_t>(y)] *
                     tables[2][m][static_cast<std::size_t>(z)];
      value += (modes[m].amplitude * scale[m]) * shape;
    }
    visit(x, y, z, value);
  });
}

}  // namespace

StencilWeights stencil_weights(int radius, int dims) {
  double harmonic = 0;
  for (int k = 1; k <= radius; ++k) harmonic += 1.0 / k;
  StencilWeights weights;
  weights.c.push_back(0.5);
  for (int k = 1; k <= radius; ++k) weights.c.push_back(0.5 / (k * harmonic * 2.0 * dims));
  return weights;
}

std::int64_t flops_per_cell(int radius, int dims) {
  // per k: dims pair adds, dims - 1 adds joining them, one multiply, one add; plus c0 * u.
  return static_cast<std::int64_t>(radius) * (2 * dims + 1) + 1;
}

#if defined(TETHER_APPS_STENCIL_X86)
bool cpu_has_avx2_stencil() noexcept {
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has_avx2;
}

bool cpu_has_avx512_stencil() noexcept {
  static const bool has_avx512 = __builtin_cpu_supports("avx512f");
  return has_avx512;
}
#else
bool cpu_has_avx2_stencil() noexcept { return false; }
bool cpu_has_avx512_stencil() noexcept { return false; }
#endif

const char* stencil_copy_name() noexcept {
  if (cpu_has_avx512_stencil()) return "avx512";
  return cpu_has_avx2_stencil() ? "avx2" : "baseline";
}

void apply_stencil_baseline(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges) {
  apply_stencil_fields(block, dims, weights, cells, edges);
}

void apply_stencil(Block& block, int dims, const StencilWeights& weights, const Box& cells, XEdges edges) {
#if defined(TETHER_APPS_STENCIL_X86)
  if (cpu_has_avx512_stencil()) return apply_stencil_avx512(block, dims, weights, cells, edges);
  if (cpu_has_avx2_stencil()) return apply_stencil_avx2(block, dims, weights, cells, edges);
#endif
  apply_stencil_baseline(block, dims, weights, cells, edges);
}

std::vector<Mode> modes_of_field(int field, int dims) {
  std::int64_t shift = field;
  Mode broad{{1 + shift, 1, dims == 3 ? 1 : 1}, 1.0};
  Mode ripple{{3 + shift, 2, dims == 3 ? 2 : 1}, 0.5};
  return {broad, ripple};
}

double eigenvalue(const Mode& mode, const Problem& problem, const StencilWeights& weights) {
  double value = weights.c[0];
  for (std::size_t k = 1; k < weights.c.size(); ++k) {
    for (int axis = 0; axis < problem.dims; ++axis) {
      double theta = std::numbers::pi * static_cast<double>(mode.wavenumber[axis]) /
                     static_cast<double>(problem.global_cells[axis] + 1);
      value += weights.c[k] * 2.0 * std::cos(static_cast<double>(k) * theta);
    }
  }
  return value;
}

void fill_initial(Block& block, const Problem& problem) {
  std::vector<double> unscaled(2, 1.0);
  for (int field = 0; field < block.fields(); ++field) {
    double* values = block.current(field);
    for_each_mode_value(block, problem, field, unscaled,
                        [&](std::int64_t x, std::int64_t y, std::int64_t z, double value) {
                          values[block.index(x, y, z)] = value;
                        });
  }
}

AnalyticError analytic_error(const Block& block, const Problem& problem, const StencilWeights& weights) {
  AnalyticError result;
  for (int field = 0; field < block.fields(); ++field) {
    std::vector<double> decay;
    for (const Mode& mode : modes_of_field(field, problem.dims))
      decay.push_back(std::pow(eigenvalue(mode, problem, weights), problem.iterations));
    const double* values = block.current(field);
    for_each_mode_value(block, problem, field, decay,
                        [&](std::int64_t x, std::int64_t y, std::int64_t z, double exact) {
                          result.max_error = std::max(result.max_error, std::abs(values[block.index(x, y, z)] - exact));
                          result.max_exact = std::max(result.max_exact, std::abs(exact));
                        });
  }
  return result;
}

}  // namespace tether::apps
