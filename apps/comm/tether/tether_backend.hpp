// The tether modes: rank, size and collectives over tether::Runtime (PMIx bootstrap, so
// they run under tether-run, mpirun or srun).
#pragma once

#include <memory>

#include "apps/comm/comm.hpp"

namespace tether::apps {

// --comm persist (the default): one persistent channel per message, created and connected
// once; packs into the channels' pinned buffers and unpacks where messages landed.
Expected<std::unique_ptr<CommBackend>> start_tether_persist_backend(int& argc, char**& argv);

// --comm sendrecv: tether irecv/isend per message every iteration, then wait for all.
Expected<std::unique_ptr<CommBackend>> start_tether_sendrecv_backend(int& argc, char**& argv);

}  // namespace tether::apps
