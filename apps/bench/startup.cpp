// tether-bench-startup: the smallest tether job. Each rank starts the runtime (PMIx
// bootstrap, pool, transport), meets the others at a barrier and exits; startup-vs-mpi.sh
// times whole jobs of it against tether-mpi-bench-startup under mpirun.
#include <fmt/format.h>

#include "tether/runtime.hpp"

int main(int, char** argv) {
  auto runtime = tether::Runtime::start();
  if (!runtime) {
    fmt::print(stderr, "{}: {}\n", argv[0], runtime.error().message());
    return 1;
  }
  if (auto met = (*runtime)->barrier(); !met) {
    fmt::print(stderr, "{}: barrier: {}\n", argv[0], met.error().message());
    return 1;
  }
  return 0;
}
