#include "runtime/base/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>

#include "runtime/base/config.hpp"

namespace tether::log {
namespace {

struct Sink {
  int fd = STDERR_FILENO;
  Level level = Level::warn;
  std::array<char, 64> host{};
};

std::atomic<int> g_rank{-1};

Level level_from(std::string_view name) {
  constexpr std::string_view kNames[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i)
    if (kNames[i] == name) return static_cast<Level>(i);
  return Level::warn;
}

std::string expand_path(std::string_view pattern, std::string_view host) {
  std::string path;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      path += std::to_string(::getpid());
      ++i;
    } else if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
      path += host;
      ++i;
    } else {
      path += pattern[i];
    }
  }
  return path;
}

int open_sink(std::string_view target, std::string_view host) {
  if (target == "stderr") return STDERR_FILENO;
  if (target == "stdout") return STDOUT_FILENO;
  std::string path = expand_path(target, host);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  std::fprintf(stderr, "tether: cannot open TETHER_LOG_FILE=%s (errno %d); logging to stderr\n",
               path.c_str(), errno);
  return STDERR_FILENO;
}

Sink make_sink() {
  const auto& config = config::Config::global();
  Sink sink;
  ::gethostname(sink.host.data(), sink.host.size() - 1);
  sink.level = level_from(config.choice("TETHER_LOG_LEVEL"));
  sink.fd = open_sink(config.text("TETHER_LOG_FILE"), sink.host.data());
  return sink;
}

constexpr std::string_view level_tag(Level level) {
  constexpr std::string_view kTags[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  return kTags[static_cast<int>(level)];
}

void write_to(const Sink& out, Level level, std::string_view subsystem, std::string_view text) noexcept {
  fmt::basic_memory_buffer<char, 700> line;
  try {
    fmt::format_to(std::back_inserter(line), "[{}:{}:{}] {} {}: {}\n", out.host.data(), ::getpid(),
                   g_rank.load(std::memory_order_relaxed), subsystem, level_tag(level), text);
  } catch (...) {
    return;
  }
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t written = ::write(out.fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

// Writes to `sink` directly: going through sink() here would re-enter its call_once and
// deadlock the first log line of any process with an unknown TETHER_* variable set.
void print_config_warnings(const Sink& sink) {
  if (sink.level < Level::warn) return;
  for (const std::string& warning : config::Config::global().warnings())
    write_to(sink, Level::warn, "config", warning);
}

const Sink& sink() {
  static const Sink instance = make_sink();
  static std::once_flag warned;
  std::call_once(warned, [] { print_config_warnings(instance); });
  return instance;
}

}  // namespace

bool enabled(Level level) noexcept { return level <= sink().level; }

void set_rank(int rank) noexcept { g_rank.store(rank, std::memory_order_relaxed); }

void write_line(Level level, std::string_view subsystem, std::string_view text) noexcept {
  write_to(sink(), level, subsystem, text);
}

}  // namespace tether::log
