// Verification: a checksum that does not depend on the decomposition (so it can be
// compared across process grids and --comm modes), the serial reference on the whole
// grid, and the tolerance of the analytic check.
#pragma once

#include <cstdint>
#include <limits>

#include "apps/core/block.hpp"
#include "apps/core/problem.hpp"

namespace tether::apps {

// Sum over owned cells of a hash of (global cell, field, bit pattern of the value),
// modulo 2^64. Adding the ranks' sums gives the same number for every decomposition
// exactly when the fields are bitwise identical (up to hash collisions).
[[nodiscard]] std::uint64_t field_checksum(const Block& block, const Problem& problem);

// Largest grid (cells x fields) the serial reference is computed for by default.
inline constexpr std::int64_t kSerialReferenceMaxValues = std::int64_t{1} << 22;
[[nodiscard]] bool serial_reference_is_cheap(const Problem& problem);

// Runs the same stencil on the whole grid as one block and returns its checksum.
[[nodiscard]] std::uint64_t serial_reference_checksum(const Problem& problem);

// Largest |error| / |exact| the analytic check accepts: rounding grows about one unit
// in the last place per iteration; a ghost one iteration stale is orders larger.
[[nodiscard]] double analytic_tolerance(const Problem& problem);

// The exact solution's largest value below which the analytic check cannot judge: the
// field's values are subnormal or zero there, so a wrong field would match as well.
inline constexpr double kSmallestCheckedAmplitude =
    std::numeric_limits<double>::min() / std::numeric_limits<double>::epsilon();
// Iterations after which the exact solution still reaches kSmallestCheckedAmplitude
// (INT64_MAX when no mode decays).
[[nodiscard]] std::int64_t most_analytic_iterations(const Problem& problem);

}  // namespace tether::apps
