// tether-mpi-pingpong: the Open MPI baseline for tether-pingpong (MPI_Send/MPI_Recv).
#include "apps/bench/mpi_endpoint.hpp"

int main(int argc, char** argv) { return tether::bench::mpi_app_main(argc, argv, tether::bench::Test::latency); }
