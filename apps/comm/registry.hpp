// The --comm modes: one row per mode, built or not. A mode that is not compiled in
// answers with an error that says what it needs, never with a stand-in.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "apps/comm/comm.hpp"

namespace tether::apps {

struct CommMode {
  std::string_view name;
  std::string_view summary;
  bool built;
  // Starts the process group (argc/argv go to MPI_Init for MPI modes).
  Expected<std::unique_ptr<CommBackend>> (*start)(int& argc, char**& argv);
};

[[nodiscard]] std::span<const CommMode> comm_modes();
// The first built mode in table order (persist).
[[nodiscard]] std::string_view default_comm_mode();
[[nodiscard]] Expected<const CommMode*> find_comm_mode(std::string_view name);
// One "  name  summary" line per mode for --help; "(not built yet)" marks modes left out.
[[nodiscard]] std::string describe_comm_modes();

}  // namespace tether::apps
