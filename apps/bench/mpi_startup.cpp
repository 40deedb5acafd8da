// tether-mpi-bench-startup: the Open MPI baseline for tether-bench-startup (MPI_Init,
// MPI_Barrier, MPI_Finalize).
#include <mpi.h>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  int barrier = MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return barrier == MPI_SUCCESS ? 0 : 1;
}
