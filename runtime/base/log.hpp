// Logging: TETHER_LOG_LEVEL, TETHER_LOG_FILE. Each line starts "[host:pid:rank] subsys".
// Formatting uses a stack buffer and write(2), so a line allocates nothing for messages
// under 500 bytes (the registration cache's monitor logs from inside memory hooks).
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace tether::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

[[nodiscard]] bool enabled(Level level) noexcept;
void write_line(Level level, std::string_view subsystem, std::string_view text) noexcept;
// Rank shown in the prefix once the runtime knows it (-1 before).
void set_rank(int rank) noexcept;

template <class... Args>
void print(Level level, std::string_view subsystem, fmt::format_string<Args...> format,
           Args&&... args) noexcept {
  if (!enabled(level)) return;
  fmt::basic_memory_buffer<char, 500> buffer;
  try {
    fmt::format_to(std::back_inserter(buffer), format, std::forward<Args>(args)...);
  } catch (...) {
    return;
  }
  write_line(level, subsystem, std::string_view(buffer.data(), buffer.size()));
}

template <class... Args>
void error(std::string_view subsystem, fmt::format_string<Args...> format, Args&&... args) noexcept {
  print(Level::error, subsystem, format, std::forward<Args>(args)...);
}
template <class... Args>
void warn(std::string_view subsystem, fmt::format_string<Args...> format, Args&&... args) noexcept {
  print(Level::warn, subsystem, format, std::forward<Args>(args)...);
}
template <class... Args>
void info(std::string_view subsystem, fmt::format_string<Args...> format, Args&&... args) noexcept {
  print(Level::info, subsystem, format, std::forward<Args>(args)...);
}

}  // namespace tether::log

// Debug and trace lines exist only in builds with TETHER_DEBUG_LOG (Debug builds).
#ifdef TETHER_DEBUG_LOG
#define TETHER_LOG_DEBUG(subsystem, ...) \
  ::tether::log::print(::tether::log::Level::debug, subsystem, __VA_ARGS__)
#define TETHER_LOG_TRACE(subsystem, ...) \
  ::tether::log::print(::tether::log::Level::trace, subsystem, __VA_ARGS__)
#else
#define TETHER_LOG_DEBUG(subsystem, ...) ((void)0)
#define TETHER_LOG_TRACE(subsystem, ...) ((void)0)
#endif
