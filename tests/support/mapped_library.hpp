// Whether this process has a library mapped (a line of /proc/self/maps names it).
#pragma once

#include <fstream>
#include <string>
#include <string_view>

namespace tether::testing {

inline bool library_mapped(std::string_view file_name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(file_name) != std::string::npos) return true;
  return false;
}

}  // namespace tether::testing
