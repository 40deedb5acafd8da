#include "runtime/base/stats.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether::stats {
namespace {

struct Source {
  std::string component;
  std::function<std::string()> describe;
};

struct Registry {
  std::mutex mutex;
  std::vector<Source> sources;
};

Registry& registry() {
  static Registry* instance = new Registry;  // outlives atexit handlers
  return *instance;
}

void dump_at_exit() {
  std::string text = dump_all();
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    log::write_line(log::Level::info, "stats", std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
}

void arm_exit_dump_once() {
  static std::once_flag armed;
  std::call_once(armed, [] {
    if (config::Config::global().choice("TETHER_STATS") == "exit") std::atexit(dump_at_exit);
  });
}

}  // namespace

void register_source(std::string_view component, std::function<std::string()> describe) {
  arm_exit_dump_once();
  std::lock_guard lock(registry().mutex);
  registry().sources.push_back({std::string(component), std::move(describe)});
}

std::string dump_all() {
  std::lock_guard lock(registry().mutex);
  std::string out;
  for (const Source& source : registry().sources) {
    std::string text = source.describe();
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      out += source.component + " " + text.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return out;
}

}  // namespace tether::stats
