// --bind-to: which CPU each rank runs on.
#pragma once

#include <vector>

#include "launch/launch_options.hpp"
#include "tether/error.hpp"

namespace tether::launch {

// Rank r's CPU, or none (an empty list). Bound, rank r gets the r-th CPU this launcher may
// run on (its own affinity mask, so a cpuset or taskset around tether-run is honoured).
// - core: an error when there are fewer CPUs than ranks.
// - automatic: bound when the ranks fit those CPUs, else none. Unbound, the kernel put
//   both ranks of a 2-rank job on one of this project's 2 CPUs in 2 of 8 runs.
// - none: none.
Expected<std::vector<int>> cpus_for_ranks(Binding binding, int ranks);

}  // namespace tether::launch
