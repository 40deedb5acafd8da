// PrivateTempDir: a mode-0700 directory for the PMIx server's sockets and files, removed
// with everything in it when the launcher exits (normally, on failure, or on Ctrl-C).
#pragma once

#include <string>

#include "tether/error.hpp"

namespace tether::launch {

class PrivateTempDir {
 public:
  // Creates <TETHER_RUN_TMPDIR>/tether-run.<pid>.XXXXXX.
  static Expected<PrivateTempDir> create();
  PrivateTempDir(PrivateTempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  PrivateTempDir& operator=(PrivateTempDir&&) = delete;
  PrivateTempDir(const PrivateTempDir&) = delete;
  ~PrivateTempDir();

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  explicit PrivateTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace tether::launch
