// --bind-to core: rank r on the r-th CPU of the launcher's affinity mask.
#include "launch/binding.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tether::launch {

Expected<std::vector<int>> cpus_for_ranks(int ranks) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    int error = errno;
    return make_error(Errc::unsupported, fmt::format("--bind-to core: sched_getaffinity failed: {}", strerror(error)),
                      "run with --bind-to none", error);
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && static_cast<int>(cpus.size()) < ranks; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  if (static_cast<int>(cpus.size()) < ranks)
    return make_error(Errc::invalid_argument,
                      fmt::format("--bind-to core gives each rank a CPU of its own, but {} ranks were asked for and "
                                  "this launcher may use {} CPUs",
                                  ranks, CPU_COUNT(&allowed)),
                      "start at most that many ranks, or drop --bind-to core (or pass --bind-to none)");
  return cpus;
}

}  // namespace tether::launch
