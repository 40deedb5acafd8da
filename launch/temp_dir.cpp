// PrivateTempDir: mkdtemp (mode 0700 by definition), removed depth-first at exit.
#include "launch/temp_dir.hpp"

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether::launch {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (::remove(path) != 0 && errno != ENOENT) {
    log::warn("launch", "cannot remove {}: {}", path, std::strerror(errno));
  }
  return 0;
}

}  // namespace

Expected<PrivateTempDir> PrivateTempDir::create() {
  std::string parent(config::Config::global().text("TETHER_RUN_TMPDIR"));
  std::string pattern = fmt::format("{}/tether-run.{}.XXXXXX", parent, getpid());
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    int error = errno;
    return make_error(Errc::config, fmt::format("mkdtemp({}) failed: {}", pattern, std::strerror(error)),
                      "set TETHER_RUN_TMPDIR to an existing directory this user can write", error);
  }
  return PrivateTempDir(std::string(buffer.data()));
}

PrivateTempDir::~PrivateTempDir() {
  if (path_.empty()) return;
  nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace tether::launch
