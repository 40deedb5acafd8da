#include "apps/core/solver.hpp"


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

Status exchange_halos(Block& block, const HaloPlan& plan, HaloExchange& exchange, bool skip_unpack) {
  for (std::size_t i = 0; i < plan.send_faces.size(); ++i) block.pack(plan.send_faces[i], exchange.send_buffer(i));
  if (exchange.exchange() != Status::done) return Status::error;
  if (!skip_unpack) {
    for (std::size_t i = 0; i < plan.receive_faces.size(); ++i)
      block.unpack(plan.receive_faces[i], exchange.receive_buffer(i));
  }
  for (int face : plan.edge_faces) block.reflect_at_edge(face);
  return Status::done;
}

}  // namespace

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
  return plan;
}

Expected<LoopTimes> run_iterations(Block& block, const Problem& problem, const HaloPlan& plan,
                                   HaloExchange& exchange, const LoopSettings& settings) {
  StencilWeights weights = stencil_weights(problem.radius, problem.dims);
  LoopTimes times;
  int faulty_iteration = problem.iterations / 2;
  Clock::time_point loop_start = Clock::now();
  for (int iteration = 0; iteration < problem.iterations; ++iteration) {
    bool at_fault = settings.fault_rank && iteration == faulty_iteration;
    if (at_fault && settings.fault == Fault::killed) ::raise(SIGKILL);  // mid-exchange: the peers are waiting
    bool skip_unpack = at_fault && settings.fault == Fault::stale_ghosts;
    Clock::time_point start = Clock::now();
    if (exchange_halos(block, plan, exchange, skip_unpack) != Status::done) {
      return make_error(Errc::transport, fmt::format("the halo exchange failed in iteration {}", iteration),
                        "see the error logged just before this line for the cause");
    }
    Clock::time_point exchanged = Clock::now();
    apply_stencil(block, problem.dims, weights);
    burn_compute(problem.compute_us);
    block.swap_current_and_next();
    Clock::time_point computed = Clock::now();
    times.comm_s += seconds_between(start, exchanged);
    times.compute_s += seconds_between(exchanged, computed);
  }
  times.total_s = seconds_between(loop_start, Clock::now());
  return times;
}

}  // namespace tether::apps
