// The tether modes: rank, size and collectives over tether::Runtime (PMIx bootstrap, so
// they run under tether-run, mpirun or srun). --comm sendrecv lives here; --comm persist
// joins it once persistent channels exist.
#pragma once

#include <memory>

#include "apps/comm/comm.hpp"

namespace tether::apps {

// --comm sendrecv: tether irecv/isend per message every iteration, then wait for all.
Expected<std::unique_ptr<CommBackend>> start_tether_sendrecv_backend(int& argc, char**& argv);

}  // namespace tether::apps
