#include "apps/comm/registry.hpp"

#include <fmt/format.h>

#include "apps/comm/tether/tether_backend.hpp"

#ifdef TETHER_APPS_HAVE_MPI
#include "apps/comm/mpi/mpi_backend.hpp"
#endif

namespace tether::apps {
namespace {

#ifndef TETHER_APPS_HAVE_MPI
Expected<std::unique_ptr<CommBackend>> start_mpi_not_built(int&, char**&) {
  return make_error(Errc::unsupported, "the MPI modes were not built: CMake found no MPI",
                    "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and reconfigure");
}
#endif

constexpr bool kHaveMpi =
#ifdef TETHER_APPS_HAVE_MPI
    true;
#else
    false;
#endif

#ifdef TETHER_APPS_HAVE_MPI
constexpr auto kStartMpi = &start_mpi_isend_backend;
constexpr auto kStartMpiPersistent = &start_mpi_persistent_backend;
#else
constexpr auto kStartMpi = &start_mpi_not_built;
constexpr auto kStartMpiPersistent = &start_mpi_not_built;
#endif

// Table order is preference order for the default.
constexpr CommMode kModes[] = {
    {"persist", "tether persistent channels, one per face and direction, connected once", true,
     &start_tether_persist_backend},
    {"sendrecv", "tether non-blocking send/receive, re-posted every iteration", true,
     &start_tether_sendrecv_backend},
    {"mpi", "MPI_Irecv/MPI_Isend posted every iteration, MPI_Waitall", kHaveMpi, kStartMpi},
    {"mpi-persist", "MPI_Recv_init/MPI_Send_init once, MPI_Startall/MPI_Waitall per iteration",
     kHaveMpi, kStartMpiPersistent},
};

}  // namespace

std::span<const CommMode> comm_modes() { return kModes; }

std::string_view default_comm_mode() {
  for (const CommMode& mode : kModes)
    if (mode.built) return mode.name;
  return kModes[0].name;
}

Expected<const CommMode*> find_comm_mode(std::string_view name) {
  for (const CommMode& mode : kModes)
    if (mode.name == name) return &mode;
  std::string known;
  for (const CommMode& mode : kModes) known += fmt::format("{}{}", known.empty() ? "" : ", ", mode.name);
  return make_error(Errc::invalid_argument, fmt::format("--comm {} is not a mode", name),
                    fmt::format("choose one of: {}", known));
}

std::string describe_comm_modes() {
  std::string text;
  for (const CommMode& mode : kModes) {
    text += fmt::format("  {:<12} {}{}\n", mode.name, mode.summary, mode.built ? "" : " (not built yet)");
  }
  return text;
}

}  // namespace tether::apps
