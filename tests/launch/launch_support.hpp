// Shared by the launch tests: binary paths, a fresh TETHER_RUN_TMPDIR, output parsing.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/launch/launch_check_payload.hpp"
#include "tests/launch/subprocess.hpp"

namespace tether::testing {

using namespace std::chrono_literals;

inline constexpr auto kWatchdog = std::chrono::milliseconds(60000);
inline constexpr std::size_t kPayloadBytes = 4096;  // launch-check's default

inline std::string tether_run() { return TETHER_RUN_PATH; }
inline std::string launch_check() { return TETHER_LAUNCH_CHECK_PATH; }
inline std::string mpirun() { return TETHER_MPIRUN_PATH; }

// A directory of its own per test for tether-run's private directory; removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tether-launch-test.XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string env() const { return "TETHER_RUN_TMPDIR=" + path_; }
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) names.push_back(entry.path().string());
    return names;
  }

 private:
  std::string path_;
};

// Ranks that printed "launch-check rank R of N ok: ... digest D" with the expected digest.
inline int count_verified_ranks(const std::string& output, int ranks) {
  const std::string digest = fmt::format("{:016x}", job_digest(ranks, kPayloadBytes));
  int verified = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    std::string line = fmt::format("launch-check rank {} of {} ok: verified {} peers, digest {}", rank, ranks, ranks, digest);
    if (output.find(line) != std::string::npos) ++verified;
  }
  return verified;
}

inline int count_occurrences(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

}  // namespace tether::testing
