// --bind-to auto|core|none: rank r on the r-th CPU of the launcher's affinity mask, or not.
#include "launch/binding.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tether::launch {
namespace {

Expected<std::vector<int>> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    int error = errno;
    return make_error(Errc::unsupported, fmt::format("--bind-to: sched_getaffinity failed: {}", strerror(error)),
                      "run with --bind-to none", error);
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus;
}

}  // namespace

Expected<std::vector<int>> cpus_for_ranks(Binding binding, int ranks) {
  if (binding == Binding::none) return std::vector<int>();
  auto cpus = allowed_cpus();
  if (!cpus) return binding == Binding::automatic ? std::vector<int>() : cpus;
  auto count = static_cast<int>(cpus->size());
  if (count >= ranks) {
    cpus->resize(static_cast<std::size_t>(ranks));
    return cpus;
  }
  if (binding == Binding::automatic) return std::vector<int>();
  return make_error(Errc::invalid_argument,
                    fmt::format("--bind-to core gives each rank a CPU of its own, but {} ranks were asked for and "
                                "this launcher may use {} CPUs",
                                ranks, count),
                    "start at most that many ranks, or pass --bind-to auto or none");
}

}  // namespace tether::launch
