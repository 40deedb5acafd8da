// The iteration loop shared by every --comm mode: pack faces, start the exchange, reflect
// at the grid's edges, compute the cells that read no neighbour's halo (and burn the
// optional compute time) while the halos travel, finish the exchange, unpack, compute the
// rest. Without overlap the exchange finishes before any cell is computed.
#pragma once

#include <vector>

#include "apps/comm/comm.hpp"
#include "apps/core/block.hpp"
#include "apps/core/stencil.hpp"

namespace tether::apps {

// Which faces of this rank talk to a neighbour (in message order) and which lie on the
// edge of the global grid.
struct HaloPlan {
  HaloPattern pattern;
  std::vector<int> send_faces;     // send_faces[i] is packed into send_buffer(i)
  std::vector<int> receive_faces;  // receive_buffer(i) is unpacked into ghost face receive_faces[i]
  std::vector<int> edge_faces;
  XEdges x_edges;  // edge faces across x whose ghosts the stencil refills as it writes rows
  std::size_t halo_bytes_per_iteration = 0;  // bytes this rank sends per iteration
  // The owned cells split by what they read: `interior` reads no ghost a neighbour fills
  // (its x bounds moved to whole cache lines where that leaves cells); `rim` is the rest.
  Box interior;
  std::vector<Box> rim;
};

// Message tags name the receiver's ghost face, so a rank that is both neighbours of
// another along one axis (2 ranks on that axis) cannot mix the two messages up.
[[nodiscard]] HaloPlan make_halo_plan(const Block& block, const Problem& problem, int rank);
// Whether the stencil fills edge face `face`'s ghosts (x_edges), so no pass of its own does.
[[nodiscard]] bool stencil_fills(const HaloPlan& plan, int face);

// Test-only failure injection: proves verification catches a wrong halo.
enum class Fault { none, stale_ghosts, killed };

struct LoopTimes {
  double total_s = 0;
  double comm_s = 0;     // pack + exchange + unpack + edge fill left to a pass (what overlap left exposed)
  double compute_s = 0;  // stencil + compute knob
};

struct LoopSettings {
  Fault fault = Fault::none;
  bool fault_rank = false;  // this rank injects the fault
  bool overlap = true;       // compute the interior while the halos travel
};

// Runs problem.iterations iterations. Fails only when the exchange fails.
[[nodiscard]] Expected<LoopTimes> run_iterations(Block& block, const Problem& problem, const HaloPlan& plan,
                                                 HaloExchange& exchange, const LoopSettings& settings);

}  // namespace tether::apps
