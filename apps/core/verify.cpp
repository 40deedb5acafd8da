#include "apps/core/verify.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "apps/comm/comm.hpp"
#include "apps/core/solver.hpp"
#include "apps/core/stencil.hpp"

namespace tether::apps {
namespace {

std::uint64_t mix64(std::uint64_t value) {  // the splitmix64 finaliser
  value ^= value >> 30;
  value *= 0xbf58476d1ce4e5b9ULL;
  value ^= value >> 27;
  value *= 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

}  // namespace

std::uint64_t field_checksum(const Block& block, const Problem& problem) {
  const Cells3& n = problem.global_cells;
  const Cells3& offset = block.offset();
  std::uint64_t sum = 0;
  for (int field = 0; field < block.fields(); ++field) {
    const double* values = block.current(field);
    Box owned{{0, 0, 0}, block.extent()};
    for_each_cell(owned, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
      std::int64_t global = offset[0] + x + n[0] * (offset[1] + y + n[1] * (offset[2] + z + n[2] * field));
      std::uint64_t bits = std::bit_cast<std::uint64_t>(values[block.index(x, y, z)]);
      sum += mix64(bits ^ mix64(static_cast<std::uint64_t>(global)));
    });
  }
  return sum;
}

bool serial_reference_is_cheap(const Problem& problem) {
  return total_cells(problem) * problem.fields <= kSerialReferenceMaxValues;
}

std::uint64_t serial_reference_checksum(const Problem& problem) {
  Problem serial = problem;
  serial.procs = {1, 1, 1};
  serial.compute_us = 0;
  Block block(serial, 0);
  fill_initial(block, serial);
  HaloPlan plan = make_halo_plan(block, serial, 0);
  NoMessageExchange no_messages;
  (void)run_iterations(block, serial, plan, no_messages, LoopSettings{});  // cannot fail: no messages
  return field_checksum(block, serial);
}

double analytic_tolerance(const Problem& problem) {
  return 1e-13 * static_cast<double>(problem.iterations + 1);
}

// The slowest mode sets the limit: amplitude x |eigenvalue|^t >= 4 x kSmallestCheckedAmplitude.
// The 4: a cell's sine product reaches at least cos(pi/4)^3 (over a quarter) of the slowest
// mode's amplitude, so the largest value on the grid stays above the check's floor too.
std::int64_t most_analytic_iterations(const Problem& problem) {
  StencilWeights weights = stencil_weights(problem.radius, problem.dims);
  double most = 0;
  for (int field = 0; field < problem.fields; ++field) {
    for (const Mode& mode : modes_of_field(field, problem.dims)) {
      double decay = std::abs(eigenvalue(mode, problem, weights));
      if (decay >= 1.0) return std::numeric_limits<std::int64_t>::max();
      most = std::max(most, std::log(4 * kSmallestCheckedAmplitude / mode.amplitude) / std::log(decay));
    }
  }
  return most >= 9e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(most);
}

}  // namespace tether::apps
