// The MPI modes. Only files in this folder include <mpi.h>; MPI is initialised when one
// of these backends starts and finalised by its finish().
#pragma once

#include <memory>

#include "apps/comm/comm.hpp"

namespace tether::apps {

// --comm mpi: MPI_Irecv/MPI_Isend per message every iteration, then MPI_Waitall.
Expected<std::unique_ptr<CommBackend>> start_mpi_isend_backend(int& argc, char**& argv);
// --comm mpi-persist: persistent requests made once, MPI_Startall/MPI_Waitall per iteration.
Expected<std::unique_ptr<CommBackend>> start_mpi_persistent_backend(int& argc, char**& argv);

}  // namespace tether::apps
