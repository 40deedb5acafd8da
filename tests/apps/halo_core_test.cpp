// The shared halo core without any process group: decomposition, message pattern,
// edge reflection, and that the checksum does not depend on the process grid.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <tuple>

#include "apps/core/block.hpp"
#include "apps/core/decomposition.hpp"
#include "apps/core/solver.hpp"
#include "apps/core/stencil.hpp"
#include "apps/core/verify.hpp"

namespace tether::apps {
namespace {

TEST(HaloDecompositionTest, ProcessGridsAreAsSquareAsPossible) {
  EXPECT_EQ(balanced_process_grid(1, 2), (Procs3{1, 1, 1}));
  EXPECT_EQ(balanced_process_grid(4, 2), (Procs3{2, 2, 1}));
  EXPECT_EQ(balanced_process_grid(6, 2), (Procs3{2, 3, 1}));
  EXPECT_EQ(balanced_process_grid(2, 2), (Procs3{1, 2, 1}));  // faces across y: whole rows
  EXPECT_EQ(balanced_process_grid(7, 2), (Procs3{1, 7, 1}));
  EXPECT_EQ(balanced_process_grid(8, 3), (Procs3{2, 2, 2}));
  EXPECT_EQ(balanced_process_grid(12, 3), (Procs3{2, 2, 3}));
  EXPECT_EQ(balanced_process_grid(6, 3), (Procs3{1, 2, 3}));
}

TEST(HaloDecompositionTest, UnevenBlocksCoverTheAxisOnce) {
  for (std::int64_t cells : {7, 37, 100}) {
    for (int parts : {1, 2, 3, 6}) {
      std::int64_t next = 0;
      for (int index = 0; index < parts; ++index) {
        Extent extent = block_extent(cells, parts, index);
        EXPECT_EQ(extent.begin, next);
        EXPECT_GE(extent.count, cells / parts);
        EXPECT_LE(extent.count, cells / parts + 1);
        next = extent.begin + extent.count;
      }
      EXPECT_EQ(next, cells);
    }
  }
}

TEST(HaloDecompositionTest, RejectsBlocksNarrowerThanTheRadius) {
  Problem problem{2, {5, 40, 1}, {2, 1, 1}, 3, 1, 1, 0};
  auto result = validate(problem, 2);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);
  EXPECT_NE(result.error().cause.find("narrower than the radius 3"), std::string::npos);
  EXPECT_FALSE(validate(Problem{2, {40, 40, 1}, {3, 2, 1}, 1, 1, 1, 0}, 4));
  EXPECT_TRUE(validate(Problem{2, {40, 40, 1}, {3, 2, 1}, 1, 1, 1, 0}, 6));
}

// A block too large for the node's memory is refused by name (its size in elements once
// wrapped to 0 and the run wrote through an empty vector).
TEST(HaloDecompositionTest, RejectsBlocksLargerThanTheNodesMemory) {
  Problem problem{3, {std::int64_t{1} << 40, std::int64_t{1} << 40, 16}, {1, 1, 1}, 1, 64, 1, 0};
  auto result = validate(problem, 1);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, Errc::invalid_argument);
  EXPECT_NE(result.error().cause.find("more than this node's"), std::string::npos) << result.error().message();
  EXPECT_NE(result.error().remedy.find("more ranks"), std::string::npos) << result.error().message();
  EXPECT_TRUE(validate(Problem{3, {64, 64, 64}, {1, 1, 1}, 1, 64, 1, 0}, 1));
}

// Every send has exactly one receive at its peer with the same tag and length.
TEST(HaloPlanTest, SendsAndReceivesPairUp) {
  for (int dims : {2, 3}) {
    Problem problem{dims, {29, 23, dims == 3 ? 19 : 1}, balanced_process_grid(12, dims), 2, 3, 1, 0};
    std::map<std::tuple<int, int, int>, std::size_t> posted;  // (from, to, tag) -> doubles
    for (int rank = 0; rank < 12; ++rank) {
      Block block(problem, rank);
      HaloPlan plan = make_halo_plan(block, problem, rank);
      EXPECT_EQ(plan.edge_faces.size() + plan.send_faces.size(), static_cast<std::size_t>(2 * dims));
      for (const HaloMessage& send : plan.pattern.sends) posted[{rank, send.peer, send.tag}] += send.doubles;
    }
    for (int rank = 0; rank < 12; ++rank) {
      Block block(problem, rank);
      HaloPlan plan = make_halo_plan(block, problem, rank);
      for (const HaloMessage& receive : plan.pattern.receives) {
        auto found = posted.find({receive.peer, rank, receive.tag});
        ASSERT_NE(found, posted.end()) << "rank " << rank << " waits for tag " << receive.tag;
        EXPECT_EQ(found->second, receive.doubles);
        posted.erase(found);
      }
    }
    EXPECT_TRUE(posted.empty());
  }
}

// The interior (computed while halos travel) and the rim cover every owned cell once and
// nothing else; no interior cell is within `radius` of a face a neighbour fills, and
// with a neighbour across x the interior's rows start and end on a cache line (8
// doubles) unless that would leave none. Blocks 20 and 5 cells wide along x included.
void expect_interior_and_rim_cover_the_block(const Problem& problem, int ranks) {
  for (int rank = 0; rank < ranks; ++rank) {
    Block block(problem, rank);
    HaloPlan plan = make_halo_plan(block, problem, rank);
    const Box owned = block.owned_box();
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int> visits;
    auto count = [&](const Box& box) {
      for_each_cell(box, [&](std::int64_t x, std::int64_t y, std::int64_t z) { ++visits[{x, y, z}]; });
    };
    count(plan.interior);
    for (const Box& box : plan.rim) count(box);
    ASSERT_EQ(static_cast<std::int64_t>(visits.size()), block.owned_cells()) << "rank " << rank;
    for (const auto& [cell, times] : visits) {
      ASSERT_EQ(times, 1) << "rank " << rank << " computes a cell twice";
      for (int axis = 0; axis < 3; ++axis) {
        std::int64_t at = std::get<0>(cell);
        if (axis == 1) at = std::get<1>(cell);
        if (axis == 2) at = std::get<2>(cell);
        ASSERT_TRUE(at >= owned.lo[axis] && at < owned.hi[axis]) << "rank " << rank << " computes a ghost";
      }
    }
    if (plan.interior.cells() == 0) continue;
    for (int face : plan.receive_faces) {
      int axis = face_axis(face);
      std::int64_t bound = face_is_high(face) ? plan.interior.hi[axis] : plan.interior.lo[axis];
      std::int64_t room = face_is_high(face) ? block.extent()[axis] - bound : bound;
      EXPECT_GE(room, problem.radius) << "rank " << rank << " face " << face;
      if (axis == 0 && block.extent()[0] >= 24) {
        EXPECT_EQ(bound % 8, 0) << "rank " << rank << " face " << face;
      }
    }
  }
}

TEST(HaloPlanTest, InteriorAndRimCoverTheBlockOnceAndTheInteriorNeedsNoHalo) {
  for (int dims : {2, 3}) {
    for (int radius : {1, 3}) {
      expect_interior_and_rim_cover_the_block(
          Problem{dims, {61, 37, dims == 3 ? 29 : 1}, balanced_process_grid(12, dims), radius, 1, 1, 0}, 12);
      expect_interior_and_rim_cover_the_block(Problem{dims, {80, 9, dims == 3 ? 7 : 1}, {4, 1, 1}, radius, 1, 1, 0}, 4);
      expect_interior_and_rim_cover_the_block(Problem{dims, {20, 9, dims == 3 ? 7 : 1}, {4, 1, 1}, radius, 1, 1, 0}, 4);
    }
  }
}

TEST(HaloBlockTest, EdgeGhostsMirrorWithTheSignFlipped) {
  Problem problem{2, {8, 6, 1}, {1, 1, 1}, 3, 1, 1, 0};
  Block block(problem, 0);
  double* values = block.current(0);
  for (std::int64_t x = 0; x < 8; ++x) values[block.index(x, 2, 0)] = static_cast<double>(x + 1);
  block.reflect_at_edge(0);
  block.reflect_at_edge(1);
  EXPECT_EQ(values[block.index(-1, 2, 0)], 0.0);
  EXPECT_EQ(values[block.index(-2, 2, 0)], -1.0);
  EXPECT_EQ(values[block.index(-3, 2, 0)], -2.0);
  EXPECT_EQ(values[block.index(8, 2, 0)], 0.0);
  EXPECT_EQ(values[block.index(9, 2, 0)], -8.0);
  EXPECT_EQ(values[block.index(10, 2, 0)], -7.0);
}

// Every cell of a block, ghosts included.
Box owned_and_ghosts(const Block& block) {
  const Cells3& ghost = block.ghost();
  const Cells3& extent = block.extent();
  return {{-ghost[0], -ghost[1], -ghost[2]}, {extent[0] + ghost[0], extent[1] + ghost[1], extent[2] + ghost[2]}};
}

// Fills every ghost of `field` with a marker and every owned cell with a value of its
// own; returns the field's cells (ghosts included) in visiting order.
std::vector<double> fill_for_reflection(Block& block, int field) {
  double* values = block.current(field);
  const Box whole = owned_and_ghosts(block);
  for_each_cell(whole, [&](std::int64_t x, std::int64_t y, std::int64_t z) { values[block.index(x, y, z)] = 12345.0; });
  for_each_cell(Box{{0, 0, 0}, block.extent()}, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    values[block.index(x, y, z)] = static_cast<double>(1 + field * 1000 + x + 10 * y + 100 * z);
  });
  std::vector<double> cells;
  for_each_cell(whole, [&](std::int64_t x, std::int64_t y, std::int64_t z) { cells.push_back(values[block.index(x, y, z)]); });
  return cells;
}

// What reflect_at_edge(face) must leave in `cell`, by the per-cell rule: inside the face's
// ghosts 0 at depth 0 and else minus the owned cell d - 1 deep; elsewhere `before`.
double reflected_value(const Block& block, int field, int face, const Cells3& cell, double before) {
  const Box ghosts = block.ghost_box(face);
  for (int axis = 0; axis < kMaxDims; ++axis)
    if (cell[axis] < ghosts.lo[axis] || cell[axis] >= ghosts.hi[axis]) return before;
  const int axis = face_axis(face);
  const std::int64_t extent = block.extent()[axis];
  std::int64_t depth = face_is_high(face) ? cell[axis] - extent : -1 - cell[axis];
  if (depth == 0) return 0.0;
  Cells3 mirror = cell;
  mirror[axis] = face_is_high(face) ? extent - depth : depth - 1;
  return -block.current(field)[block.index(mirror[0], mirror[1], mirror[2])];
}

// Every ghost of every face, 2D and 3D, radius 1 to 3, two fields, follows the per-cell
// rule, and nothing outside the face's ghosts changes.
TEST(HaloBlockTest, EdgeGhostsOfEveryFaceFollowTheMirrorRuleAndNothingElseChanges) {
  for (int dims : {2, 3}) {
    for (int radius = 1; radius <= 3; ++radius) {
      for (int face = 0; face < 2 * dims; ++face) {
        Problem problem{dims, {7, 6, dims == 3 ? 5 : 1}, {1, 1, 1}, radius, 2, 1, 0};
        Block block(problem, 0);
        std::vector<double> before[2] = {fill_for_reflection(block, 0), fill_for_reflection(block, 1)};
        block.reflect_at_edge(face);
        for (int field = 0; field < 2; ++field) {
          std::size_t at = 0;
          for_each_cell(owned_and_ghosts(block), [&](std::int64_t x, std::int64_t y, std::int64_t z) {
            double expected = reflected_value(block, field, face, {x, y, z}, before[field][at++]);
            ASSERT_EQ(block.current(field)[block.index(x, y, z)], expected)
                << "dims " << dims << " radius " << radius << " face " << face << " field " << field << " cell ("
                << x << ", " << y << ", " << z << ")";
          });
        }
      }
    }
  }
}

TEST(HaloBlockTest, PackThenUnpackMovesTheFaceIntoTheNeighboursGhosts) {
  Problem problem{3, {10, 8, 6}, {2, 1, 1}, 2, 2, 1, 0};
  Block left(problem, 0), right(problem, 1);
  fill_initial(left, problem);
  std::vector<double> buffer(left.face_doubles(1));
  left.pack(1, buffer);
  right.unpack(0, buffer);
  for (int field = 0; field < 2; ++field)
    for (std::int64_t depth = 1; depth <= 2; ++depth)
      EXPECT_EQ(right.current(field)[right.index(-depth, 3, 4)], left.current(field)[left.index(5 - depth, 3, 4)]);
}

// The checksum of the serial reference equals the sum over blocks of any process grid.
TEST(HaloVerifyTest, ChecksumDoesNotDependOnTheProcessGrid) {
  Problem serial{2, {31, 17, 1}, {1, 1, 1}, 2, 2, 0, 0};
  Block whole(serial, 0);
  fill_initial(whole, serial);
  std::uint64_t expected = field_checksum(whole, serial);
  Problem split = serial;
  split.procs = {3, 2, 1};
  std::uint64_t sum = 0;
  for (int rank = 0; rank < 6; ++rank) {
    Block block(split, rank);
    fill_initial(block, split);
    sum += field_checksum(block, split);
  }
  EXPECT_EQ(sum, expected);
  double& cell = whole.current(1)[whole.index(4, 4, 0)];
  cell = std::nextafter(cell, 2.0);
  EXPECT_NE(field_checksum(whole, serial), expected) << "a one-ulp change must change the checksum";
}

// With odd reflection at the edges the initial modes are eigenvectors of the stencil,
// which is what the analytic check relies on.
TEST(HaloVerifyTest, SerialRunMatchesTheAnalyticSolution) {
  for (int dims : {2, 3}) {
    for (int radius : {1, 2, 3}) {
      Problem problem{dims, {23, 19, dims == 3 ? 11 : 1}, {1, 1, 1}, radius, 2, 25, 0};
      Block block(problem, 0);
      fill_initial(block, problem);
      HaloPlan plan = make_halo_plan(block, problem, 0);
      NoMessageExchange none;
      ASSERT_TRUE(run_iterations(block, problem, plan, none, LoopSettings{}));
      AnalyticError error = analytic_error(block, problem, stencil_weights(radius, dims));
      EXPECT_GT(error.max_exact, 0.1);
      EXPECT_LE(error.max_error / error.max_exact, analytic_tolerance(problem)) << dims << "D radius " << radius;
      EXPECT_EQ(field_checksum(block, problem), serial_reference_checksum(problem));
    }
  }
}

// Up to most_analytic_iterations the exact solution stays above the analytic check's floor
// and the check holds; well past it the solution reaches the floor (where a wrong field
// would match too, so the apps refuse such runs or let the serial reference judge).
TEST(HaloVerifyTest, AnalyticReachEndsWhereTheSolutionFallsToTheFloor) {
  for (int dims : {2, 3}) {
    Problem problem{dims, {12, 10, dims == 3 ? 8 : 1}, {1, 1, 1}, 1, 1, 0, 0};
    std::int64_t most = most_analytic_iterations(problem);
    ASSERT_GT(most, 100) << dims << "D";
    ASSERT_LT(most, 1'000'000) << dims << "D: the modes decay, so the reach is finite";
    for (std::int64_t iterations : {most, 2 * most}) {
      problem.iterations = static_cast<int>(iterations);
      Block block(problem, 0);
      fill_initial(block, problem);
      HaloPlan plan = make_halo_plan(block, problem, 0);
      NoMessageExchange none;
      ASSERT_TRUE(run_iterations(block, problem, plan, none, LoopSettings{}));
      AnalyticError error = analytic_error(block, problem, stencil_weights(1, dims));
      if (iterations == most) {
        EXPECT_GE(error.max_exact, kSmallestCheckedAmplitude) << dims << "D";
        EXPECT_LE(error.max_error / error.max_exact, analytic_tolerance(problem)) << dims << "D";
      } else {
        EXPECT_LT(error.max_exact, kSmallestCheckedAmplitude) << dims << "D, " << iterations << " iterations";
      }
    }
  }
}

// apply_stencil runs the AVX-512 or the AVX2 copy where the CPU has it: each must give
// the baseline copy's bits (2D and 3D, the compiled radii 1 to 3 and the generic 4; rows of
// 8 and 16 cells, whose last vector reads the right ghosts, 33 and 37, which the baseline
// loop finishes, and 5, shorter than one vector).
#if defined(TETHER_APPS_STENCIL_X86)
void expect_copy_matches_the_baseline(void (*copy)(Block&, int, const StencilWeights&, const Box&, XEdges),
                                      const char* name) {
  for (int dims : {2, 3}) {
    for (std::int64_t row_cells : {8, 16, 33, 37, 5}) {
      for (int radius = 1; radius <= 4; ++radius) {
        Problem problem{dims, {row_cells, 29, dims == 3 ? 23 : 1}, {1, 1, 1}, radius, 2, 1, 0};
        Block baseline(problem, 0);
        fill_initial(baseline, problem);
        for (int face = 0; face < 2 * dims; ++face) baseline.reflect_at_edge(face);
        Block wide = baseline;
        StencilWeights weights = stencil_weights(radius, dims);
        apply_stencil_baseline(baseline, dims, weights, baseline.owned_box(), XEdges{});
        copy(wide, dims, weights, wide.owned_box(), XEdges{});
        for (int field = 0; field < 2; ++field) {
          for_each_cell(Box{{0, 0, 0}, baseline.extent()}, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
            std::size_t at = baseline.index(x, y, z);
            ASSERT_EQ(std::bit_cast<std::uint64_t>(baseline.next(field)[at]),
                      std::bit_cast<std::uint64_t>(wide.next(field)[at]))
                << name << ": dims " << dims << " radius " << radius << " field " << field << " cell (" << x << ", "
                << y << ", " << z << ")";
          });
        }
      }
    }
  }
}
#endif

// With XEdges, the stencil leaves in block.next the x ghosts reflect_at_edge would give it,
// in whichever box writes a row's end (the row split in two boxes here), and touches no
// ghost of a row whose box stops short of the edge.
TEST(HaloStencilTest, FusedEdgeGhostsMatchTheReflection) {
  for (int dims : {2, 3}) {
    for (int radius = 1; radius <= 4; ++radius) {
      Problem problem{dims, {37, 11, dims == 3 ? 7 : 1}, {1, 1, 1}, radius, 2, 1, 0};
      Block fused(problem, 0);
      fill_initial(fused, problem);
      for (int face = 0; face < 2 * dims; ++face) fused.reflect_at_edge(face);
      Block inner = fused;
      StencilWeights weights = stencil_weights(radius, dims);
      Box left = fused.owned_box(), right = fused.owned_box(), middle = fused.owned_box();
      left.hi[0] = right.lo[0] = 16;
      middle.lo[0] = 1;
      middle.hi[0] = 36;
      apply_stencil(fused, dims, weights, left, XEdges{true, true});
      apply_stencil(fused, dims, weights, right, XEdges{true, true});
      apply_stencil(inner, dims, weights, middle, XEdges{true, true});
      Block reflected = fused;
      reflected.swap_current_and_next();
      reflected.reflect_at_edge(0);
      reflected.reflect_at_edge(1);
      Box rows = fused.owned_box();
      for (int field = 0; field < 2; ++field) {
        for_each_cell(rows, [&](std::int64_t, std::int64_t y, std::int64_t z) {
          for (std::int64_t depth = 1; depth <= radius; ++depth) {
            for (std::int64_t x : {-depth, rows.hi[0] - 1 + depth}) {
              std::size_t at = fused.index(x, y, z);
              ASSERT_EQ(std::bit_cast<std::uint64_t>(fused.next(field)[at]),
                        std::bit_cast<std::uint64_t>(reflected.current(field)[at]))
                  << "dims " << dims << " radius " << radius << " ghost (" << x << ", " << y << ", " << z << ")";
              ASSERT_EQ(inner.next(field)[at], 0.0) << "a box short of the edge wrote ghost (" << x << ", " << y << ")";
            }
          }
        });
      }
    }
  }
}

// The same through make_halo_plan's interior and rim, in the loop's order, on blocks down
// to radius + 1 cells across x beside a neighbour: every face the plan lets the stencil fill
// ends up as reflect_at_edge would leave it (a thin block's interior may stop short of the
// cells a reflection reads; the plan must not fuse that edge then).
TEST(HaloStencilTest, PlannedBoxesFillTheEdgeGhostsTheyClaim) {
  for (int dims : {2, 3}) {
    for (int radius = 1; radius <= 4; ++radius) {
      for (std::int64_t cells_x = 2 * (radius + 1); cells_x <= 2 * (radius + 1) + 12; ++cells_x) {
        Problem problem{dims, {cells_x, 16, dims == 3 ? 6 : 1}, {2, 1, 1}, radius, 1, 1, 0};
        for (int rank = 0; rank < 2; ++rank) {
          Block block(problem, rank);
          HaloPlan plan = make_halo_plan(block, problem, rank);
          fill_initial(block, problem);
          for (int face = 0; face < 2 * dims; ++face) block.reflect_at_edge(face);
          StencilWeights weights = stencil_weights(radius, dims);
          apply_stencil(block, dims, weights, plan.interior, plan.x_edges);
          for (const Box& cells : plan.rim) apply_stencil(block, dims, weights, cells, plan.x_edges);
          block.swap_current_and_next();
          Block reflected = block;
          for (int face : plan.edge_faces) reflected.reflect_at_edge(face);
          Box rows = block.owned_box();
          rows.hi[0] = 1;
          for_each_cell(rows, [&](std::int64_t, std::int64_t y, std::int64_t z) {
            for (int face : plan.edge_faces) {
              if (!stencil_fills(plan, face)) continue;
              for (std::int64_t depth = 1; depth <= radius; ++depth) {
                std::int64_t x = face_is_high(face) ? block.extent()[0] - 1 + depth : -depth;
                std::size_t at = block.index(x, y, z);
                ASSERT_EQ(std::bit_cast<std::uint64_t>(block.current(0)[at]),
                          std::bit_cast<std::uint64_t>(reflected.current(0)[at]))
                    << dims << "D radius " << radius << " extent " << block.extent()[0] << " rank " << rank
                    << " ghost (" << x << ", " << y << ", " << z << ")";
              }
            }
          });
        }
      }
    }
  }
}

TEST(HaloStencilTest, Avx2CopyMatchesTheBaselineBitForBit) {
#if defined(TETHER_APPS_STENCIL_X86)
  if (!cpu_has_avx2_stencil()) GTEST_SKIP() << "this CPU has no AVX2 with FMA: only the baseline copy runs here";
  expect_copy_matches_the_baseline(apply_stencil_avx2, "avx2");
#else
  GTEST_SKIP() << "not an x86-64 build: there is no AVX2 copy";
#endif
}

TEST(HaloStencilTest, Avx512CopyMatchesTheBaselineBitForBit) {
#if defined(TETHER_APPS_STENCIL_X86)
  if (!cpu_has_avx512_stencil()) GTEST_SKIP() << "this CPU has no AVX-512F: the AVX-512 copy never runs here";
  expect_copy_matches_the_baseline(apply_stencil_avx512, "avx512");
#else
  GTEST_SKIP() << "not an x86-64 build: there is no AVX-512 copy";
#endif
}

// Every row's owned cells start on a 64-byte line (the wide copy loads whole lines).
TEST(HaloBlockTest, RowsStartOnACacheLine) {
  for (int radius : {1, 3, 9}) {
    Problem problem{3, {21, 7, 5}, {1, 1, 1}, radius, 2, 1, 0};
    Block block(problem, 0);
    for (int field = 0; field < 2; ++field) {
      for (std::int64_t z = 0; z < 5; ++z) {
        for (std::int64_t y = 0; y < 7; ++y) {
          auto address = reinterpret_cast<std::uintptr_t>(block.current(field) + block.index(0, y, z));
          EXPECT_EQ(address % 64, 0u) << "radius " << radius << " field " << field << " row " << y << ", " << z;
        }
      }
    }
  }
}

TEST(HaloVerifyTest, WeightsSumToOne) {
  for (int dims : {2, 3}) {
    for (int radius = 1; radius <= 5; ++radius) {
      StencilWeights weights = stencil_weights(radius, dims);
      double sum = weights.c[0];
      for (int k = 1; k <= radius; ++k) {
        EXPECT_GT(weights.c[static_cast<std::size_t>(k)], 0.0);
        sum += 2 * dims * weights.c[static_cast<std::size_t>(k)];
      }
      EXPECT_NEAR(sum, 1.0, 1e-15);
    }
  }
  EXPECT_EQ(flops_per_cell(1, 3), 8);
  EXPECT_EQ(flops_per_cell(2, 2), 11);
}

}  // namespace
}  // namespace tether::apps
