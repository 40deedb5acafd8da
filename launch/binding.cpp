// --bind-to auto|core|none: rank r on the r-th CPU of the launcher's affinity mask, or not.
#include "launch/binding.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/cpus.hpp"

namespace tether::launch {

Expected<std::vector<int>> cpus_for_ranks(Binding binding, int ranks) {
  if (binding == Binding::none) return std::vector<int>();
  if (binding == Binding::automatic && ranks != kRanksBoundByAuto) return std::vector<int>();
  std::vector<int> cpus = base::allowed_cpus();
  if (cpus.empty() && binding == Binding::core) {
    int error = errno;
    return make_error(Errc::unsupported,
                      fmt::format("--bind-to core: this launcher cannot read its CPU mask: sched_getaffinity: {}",
                                  strerror(error)),
                      "pass --bind-to auto or none", error);
  }
  auto count = static_cast<int>(cpus.size());
  if (count >= ranks) {
    cpus.resize(static_cast<std::size_t>(ranks));
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
