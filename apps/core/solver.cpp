#include "apps/core/solver.hpp"


#include <algorithm>
#include <chrono>
#include <csignal>

#include <fmt/format.h>

namespace tether::apps {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Dependent arithmetic until `microseconds` have passed: stands in for the rest of a
// real application's work per iteration (a sleep would hand the core to another rank).
void burn_compute(double microseconds) {
  if (microseconds <= 0) return;
  auto until = Clock::now() + std::chrono::duration<double, std::micro>(microseconds);
  volatile double sink = 1.0;
  while (Clock::now() < until) {
    double value = sink;
    for (int i = 0; i < 64; ++i) value = value * 0.999999 + 1e-7;
    sink = value;
  }
}

tl::unexpected<Error> exchange_failed(int iteration) {
  return make_error(Errc::transport, fmt::format("the halo exchange failed in iteration {}", iteration),
                    "see the error logged just before this line for the cause");
}

// Packs every face, starts the exchange and fills the ghosts at the grid's edges (they
// mirror owned cells only, so they need no halo); those across x the stencil filled as it
// wrote the rows (XEdges).
Status start_exchange(Block& block, const HaloPlan& plan, HaloExchange& exchange) {
  for (std::size_t i = 0; i < plan.send_faces.size(); ++i) block.pack(plan.send_faces[i], exchange.send_buffer(i));
  if (exchange.start() != Status::done) return Status::error;
  for (int face : plan.edge_faces)
    if (!stencil_fills(plan, face)) block.reflect_at_edge(face);
  return Status::done;
}

Status finish_exchange(Block& block, const HaloPlan& plan, HaloExchange& exchange, bool skip_unpack) {
  if (exchange.wait() != Status::done) return Status::error;
  if (skip_unpack) return Status::done;
  for (std::size_t i = 0; i < plan.receive_faces.size(); ++i)
    block.unpack(plan.receive_faces[i], exchange.receive_buffer(i));
  return Status::done;
}

// Moves x bounds that a neighbour set inwards to whole cache lines (rows start on one),
// so the interior's rows load whole lines and the rim's rows across x are a line long;
// leaves them when that would empty the interior.
void align_across_x(Box& interior, std::int64_t extent_x) {
  std::int64_t lo = interior.lo[0] > 0 ? round_up_to_line(interior.lo[0]) : 0;
  std::int64_t hi = interior.hi[0] < extent_x ? round_down_to_line(interior.hi[0]) : extent_x;
  if (lo >= hi) return;
  interior.lo[0] = lo;
  interior.hi[0] = hi;
}

// The owned cells at least `radius` away from every face that has a neighbour; empty
// (lo == hi on some axis, both inside the block) when the block is thinner than that.
Box interior_box(const Block& block, const std::vector<int>& receive_faces, int radius) {
  Box interior = block.owned_box();
  for (int face : receive_faces) {
    int axis = face_axis(face);
    if (face_is_high(face)) interior.hi[axis] = block.extent()[axis] - radius;
    else interior.lo[axis] = radius;
  }
  for (int axis = 0; axis < 3; ++axis) {
    interior.lo[axis] = std::min(interior.lo[axis], block.extent()[axis]);
    interior.hi[axis] = std::clamp(interior.hi[axis], interior.lo[axis], block.extent()[axis]);
  }
  align_across_x(interior, block.extent()[0]);
  return interior;
}

// The owned cells outside `interior`: slabs below and above it along z, then y, then x,
// each as wide as what the slabs before left.
std::vector<Box> rim_boxes(const Block& block, const Box& interior) {
  std::vector<Box> rim;
  Box left = block.owned_box();
  for (int axis = 2; axis >= 0; --axis) {
    Box below = left;
    below.hi[axis] = interior.lo[axis];
    Box above = left;
    above.lo[axis] = interior.hi[axis];
    if (below.cells() > 0) rim.push_back(below);
    if (above.cells() > 0) rim.push_back(above);
    left.lo[axis] = interior.lo[axis];
    left.hi[axis] = interior.hi[axis];
  }
  return rim;
}

// The stencil may fill an x edge's ghosts only where every box reaching that edge also
// holds the radius - 1 cells next to it: the reflection reads them from the row just written
// (a thin block's interior may stop short of them, and the rim comes later).
bool boxes_hold_edge_cells(const HaloPlan& plan, std::int64_t extent_x, int radius, bool high) {
  auto holds = [&](const Box& box) {
    if (box.cells() <= 0) return true;
    if (high) return box.hi[0] != extent_x || box.lo[0] <= extent_x - (radius - 1);
    return box.lo[0] != 0 || box.hi[0] >= radius - 1;
  };
  return holds(plan.interior) && std::all_of(plan.rim.begin(), plan.rim.end(), holds);
}

}  // namespace

bool stencil_fills(const HaloPlan& plan, int face) {
  return face_axis(face) == 0 && (face_is_high(face) ? plan.x_edges.high : plan.x_edges.low);
}

HaloPlan make_halo_plan(const Block& block, const Problem& problem, int rank) {
  HaloPlan plan;
  for (int face = 0; face < 2 * problem.dims; ++face) {
    int peer = neighbour_across(rank, face, problem.procs);
    if (peer < 0) {
      plan.edge_faces.push_back(face);
      continue;
    }
    std::size_t doubles = block.face_doubles(face);
    plan.pattern.receives.push_back({peer, face, doubles});
    plan.receive_faces.push_back(face);
    plan.pattern.sends.push_back({peer, opposite_face(face), doubles});
    plan.send_faces.push_back(face);
    plan.halo_bytes_per_iteration += doubles * sizeof(double);
  }
  plan.interior = interior_box(block, plan.receive_faces, problem.radius);
  plan.rim = rim_boxes(block, plan.interior);
  for (int face : plan.edge_faces) {
    if (face_axis(face) != 0 || !boxes_hold_edge_cells(plan, block.extent()[0], problem.radius, face_is_high(face)))
      continue;
    (face_is_high(face) ? plan.x_edges.high : plan.x_edges.low) = true;
  }
  return plan;
}

Expected<LoopTimes> run_iterations(Block& block, const Problem& problem, const HaloPlan& plan,
                                   HaloExchange& exchange, const LoopSettings& settings) {
  StencilWeights weights = stencil_weights(problem.radius, problem.dims);
  LoopTimes times;
  int faulty_iteration = problem.iterations / 2;
  for (int face : plan.edge_faces)  // from then on the stencil refills them (XEdges)
    if (stencil_fills(plan, face)) block.reflect_at_edge(face);
  Clock::time_point loop_start = Clock::now();
  for (int iteration = 0; iteration < problem.iterations; ++iteration) {
    bool at_fault = settings.fault_rank && iteration == faulty_iteration;
    if (at_fault && settings.fault == Fault::killed) ::raise(SIGKILL);  // mid-exchange: the peers are waiting
    bool skip_unpack = at_fault && settings.fault == Fault::stale_ghosts;
    Clock::time_point start = Clock::now();
    if (start_exchange(block, plan, exchange) != Status::done) return exchange_failed(iteration);
    if (!settings.overlap && finish_exchange(block, plan, exchange, skip_unpack) != Status::done)
      return exchange_failed(iteration);
    Clock::time_point started = Clock::now();
    apply_stencil(block, problem.dims, weights, plan.interior, plan.x_edges);
    burn_compute(problem.compute_us);
    Clock::time_point overlapped = Clock::now();
    if (settings.overlap && finish_exchange(block, plan, exchange, skip_unpack) != Status::done)
      return exchange_failed(iteration);
    Clock::time_point finished = Clock::now();
    for (const Box& cells : plan.rim) apply_stencil(block, problem.dims, weights, cells, plan.x_edges);
    block.swap_current_and_next();
    Clock::time_point computed = Clock::now();
    times.comm_s += seconds_between(start, started) + seconds_between(overlapped, finished);
    times.compute_s += seconds_between(started, overlapped) + seconds_between(finished, computed);
  }
  times.total_s = seconds_between(loop_start, Clock::now());
  return times;
}

}  // namespace tether::apps
