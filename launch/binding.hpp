// --bind-to: which CPU each rank runs on.
#pragma once

#include <vector>

#include "launch/launch_options.hpp"
#include "tether/error.hpp"

namespace tether::launch {

// --bind-to auto binds jobs of this many ranks only, as mpirun binds to cores jobs of up to
// 2 (a lone rank gains nothing): unbound, the kernel can run both ranks of such a job on
// one CPU while another idles (docs/BENCHMARK-HISTORY.md, session 30).
inline constexpr int kRanksBoundByAuto = 2;

// Rank r's CPU, or none (an empty list). Bound, rank r gets the r-th CPU this launcher may
// run on (its own affinity mask, so a cpuset or taskset around tether-run is honoured).
// - core: an error when there are fewer CPUs than ranks.
// - automatic: bound as by core for a job of kRanksBoundByAuto ranks that fit, else none.
// - none: none.
Expected<std::vector<int>> cpus_for_ranks(Binding binding, int ranks);

}  // namespace tether::launch
