// PrivateTempDir: mkdtemp (mode 0700 by definition), removed depth-first at exit.
#include "launch/temp_dir.hpp"

#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>
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

void remove_tree(const std::string& path) { nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

// The pid in "tether-run.<pid>.XXXXXX", or 0 for any other name.
pid_t owner_pid(std::string_view name) {
  constexpr std::string_view kPrefix = "tether-run.";
  if (!name.starts_with(kPrefix)) return 0;
  name.remove_prefix(kPrefix.size());
  pid_t pid = 0;
  auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
  return error == std::errc() && end != name.data() + name.size() && *end == '.' ? pid : 0;
}

// Directories of launchers that were killed with SIGKILL and could not clean up.
void remove_stale_directories(const std::string& parent) {
  DIR* directory = opendir(parent.c_str());
  if (directory == nullptr) return;
  while (const dirent* entry = readdir(directory)) {
    pid_t pid = owner_pid(entry->d_name);
    std::string path = parent + "/" + entry->d_name;
    struct stat info {};
    if (pid <= 0 || lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != getuid()) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    log::info("launch", "removing {}, left by tether-run pid {} which no longer runs", path, pid);
    remove_tree(path);
  }
  closedir(directory);
}

}  // namespace

Expected<PrivateTempDir> PrivateTempDir::create() {
  std::string parent(config::Config::global().text("TETHER_RUN_TMPDIR"));
  remove_stale_directories(parent);
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
  if (!path_.empty()) remove_tree(path_);
}

}  // namespace tether::launch
