// tether-mpi-bw: the Open MPI baseline for tether-bw (MPI_Isend/MPI_Irecv windows).
#include "apps/bench/mpi_endpoint.hpp"

int main(int argc, char** argv) { return tether::bench::mpi_app_main(argc, argv, tether::bench::Test::bandwidth); }
