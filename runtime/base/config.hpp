// The one configuration table: every TETHER_* knob is declared in options.cpp and read
// here. Nothing else in tether calls getenv.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tether/error.hpp"

namespace tether::config {

enum class Kind : std::uint8_t { size, boolean, integer, choice, duration, text };

// One row of the table. A size accepts K/M/G/T suffixes (binary), "auto" (stored as 0)
// and "unlimited" (stored as SIZE_MAX); a duration needs a unit (ns, us, ms, s, m).
struct Option {
  std::string_view name;           // full variable name, e.g. "TETHER_POOL_SIZE"
  std::string_view default_value;  // parsed like a user's value
  Kind kind;
  std::string_view doc;            // one line for tether-info -c
  std::string_view choices = {};   // for Kind::choice: "a|b|c"
};

std::span<const Option> table();

struct Value {
  std::uint64_t number = 0;  // size, boolean, integer, duration (ns)
  std::string text;          // choice, text; the literal value for every kind
  bool from_environment = false;
};

class Config {
 public:
  // Parses `environment` (a NULL-terminated environ-style array). Bad values and unknown
  // TETHER_* names become warnings, and the option keeps its default.
  static Config from_environment(char** environment);
  // The process-wide configuration, parsed from environ on first use.
  static const Config& global();

  [[nodiscard]] std::uint64_t size_bytes(std::string_view name) const;
  [[nodiscard]] bool flag(std::string_view name) const;
  [[nodiscard]] std::int64_t integer(std::string_view name) const;
  [[nodiscard]] std::string_view choice(std::string_view name) const;
  [[nodiscard]] std::string_view text(std::string_view name) const;
  [[nodiscard]] std::chrono::nanoseconds duration(std::string_view name) const;
  [[nodiscard]] bool is_set(std::string_view name) const;

  // Problems found while parsing, one sentence each, naming the fix.
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }
  // Paste-able "KEY=value" lines, each preceded by "# doc" comment lines.
  [[nodiscard]] std::string dump() const;

 private:
  const Value& value_of(std::string_view name, Kind expected) const;
  void apply(std::string_view name, std::string_view literal);
  void warn_unknown(std::string_view name);

  std::vector<Value> values_;
  std::vector<std::string> warnings_;
};

// Parsers, exposed for tests and for options with derived defaults; values are read
// without regard to case (`lower`).
std::string lower(std::string_view text);
Expected<std::uint64_t> parse_size(std::string_view text);
Expected<std::uint64_t> parse_duration_ns(std::string_view text);
Expected<bool> parse_bool(std::string_view text);
std::string format_size(std::uint64_t bytes);
// The table entry closest to `name` by edit distance (for "did you mean").
std::string_view closest_option(std::string_view name);

}  // namespace tether::config
