// The main of tether-mpi-pingpong/tether-mpi-bw: the same loops and table over MPI.
#pragma once

#include <string>

#include "apps/bench/bench_options.hpp"

namespace tether::bench {

// "<call> failed: <MPI's text for code>".
std::string describe_mpi_failure(int code, const char* call);

// MPI_Init, the latency or bandwidth test, MPI_Finalize; returns the exit code.
int mpi_app_main(int argc, char** argv, Test test);

}  // namespace tether::bench
