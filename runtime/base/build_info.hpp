// What this build of tether is: version, build type, transports compiled in.
#pragma once

#include <string_view>

namespace tether {

struct BuildInfo {
  std::string_view version;
  std::string_view build_type;
  std::string_view transports;  // space-separated, e.g. "ofi verbs shm"
  std::string_view compiler;
};

const BuildInfo& build_info() noexcept;

}  // namespace tether
