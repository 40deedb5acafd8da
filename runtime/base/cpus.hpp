// The CPUs this process may run on, and binding to one of them: for launchers and benches
// that place one process per CPU.
#pragma once

#include <sched.h>

#include <vector>

namespace tether::base {

// In order; empty when the mask cannot be read.
inline std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus;
}

// This process runs only on `cpu` from now on; false (errno set) when the kernel refuses.
inline bool bind_to_cpu(int cpu) {
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(cpu, &only);
  return sched_setaffinity(0, sizeof only, &only) == 0;
}

}  // namespace tether::base
