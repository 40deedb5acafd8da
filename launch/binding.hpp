// --bind-to core: which CPU each rank runs on.
#pragma once

#include <vector>

#include "tether/error.hpp"

namespace tether::launch {

// Rank r gets the r-th CPU this launcher may run on (its own affinity mask, so a cpuset
// or taskset around tether-run is honoured); an error when there are fewer CPUs than ranks.
Expected<std::vector<int>> cpus_for_ranks(int ranks);

}  // namespace tether::launch
