#include "runtime/base/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

extern char** environ;

namespace tether::config {
namespace {

constexpr std::string_view kPrefix = "TETHER_";

std::size_t index_of(std::string_view name) {
  auto options = table();
  for (std::size_t i = 0; i < options.size(); ++i)
    if (options[i].name == name) return i;
  return options.size();
}

Expected<std::uint64_t> parse_unsigned(std::string_view text, std::string_view what) {
  std::uint64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data())
    return make_error(Errc::config, fmt::format("'{}' is not a {}", text, what),
                      "use digits, e.g. 64M");
  std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (!rest.empty())
    return make_error(Errc::config, fmt::format("'{}' has trailing '{}'", text, rest),
                      fmt::format("write a plain {}", what));
  return number;
}

Expected<std::uint64_t> multiply(std::uint64_t number, std::uint64_t unit, std::string_view text) {
  if (unit != 0 && number > std::numeric_limits<std::uint64_t>::max() / unit)
    return make_error(Errc::config, fmt::format("'{}' overflows 64 bits", text),
                      "use a smaller value");
  return number * unit;
}

// Splits "64MiB" into ("64", "mib").
std::pair<std::string_view, std::string> split_number(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  return {text.substr(0, digits), lower(text.substr(digits))};
}

std::uint64_t size_unit(std::string_view suffix) {
  constexpr std::pair<std::string_view, int> kUnits[] = {
      {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20},
      {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40}};
  for (auto [name, shift] : kUnits)
    if (name == suffix) return std::uint64_t{1} << shift;
  return 0;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool choice_allows(std::string_view choices, std::string_view value) {
  while (!choices.empty()) {
    auto bar = choices.find('|');
    if (choices.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return false;
}

Expected<Value> parse_value(const Option& option, std::string_view literal) {
  Value value;
  value.text = std::string(literal);
  switch (option.kind) {
    case Kind::size: {
      auto bytes = parse_size(literal);
      if (!bytes) return tl::unexpected(bytes.error());
      value.number = *bytes;
      break;
    }
    case Kind::boolean: {
      auto on = parse_bool(literal);
      if (!on) return tl::unexpected(on.error());
      value.number = *on ? 1 : 0;
      break;
    }
    case Kind::integer: {
      std::int64_t number = 0;
      auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), number);
      if (ec != std::errc() || end != literal.data() + literal.size())
        return make_error(Errc::config, fmt::format("'{}' is not an integer", literal),
                          "write a whole number, e.g. 16");
      value.number = static_cast<std::uint64_t>(number);
      break;
    }
    case Kind::duration: {
      auto ns = parse_duration_ns(literal);
      if (!ns) return tl::unexpected(ns.error());
      value.number = *ns;
      break;
    }
    case Kind::choice:
      value.text = lower(literal);
      if (!choice_allows(option.choices, value.text))
        return make_error(Errc::config, fmt::format("'{}' is not one of {}", literal, option.choices),
                          fmt::format("pick one of {}", option.choices));
      break;
    case Kind::text:
      break;
  }
  return value;
}

}  // namespace

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Expected<std::uint64_t> parse_size(std::string_view text) {
  std::string lowered = lower(text);
  if (lowered == "auto") return std::uint64_t{0};
  if (lowered == "unlimited" || lowered == "inf") return std::numeric_limits<std::uint64_t>::max();
  auto [digits, suffix] = split_number(text);
  std::uint64_t unit = size_unit(suffix);
  if (digits.empty() || unit == 0)
    return make_error(Errc::config, fmt::format("'{}' is not a size", text),
                      "write bytes with an optional K, M, G or T suffix, e.g. 64M");
  auto number = parse_unsigned(digits, "size");
  if (!number) return number;
  return multiply(*number, unit, text);
}

Expected<std::uint64_t> parse_duration_ns(std::string_view text) {
  auto [digits, suffix] = split_number(text);
  constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000}};
  for (auto [name, unit] : kUnits) {
    if (name != suffix || digits.empty()) continue;
    auto number = parse_unsigned(digits, "duration");
    if (!number) return number;
    return multiply(*number, unit, text);
  }
  if (text == "0") return std::uint64_t{0};
  return make_error(Errc::config, fmt::format("'{}' is not a duration", text),
                    "write a number with a unit: ns, us, ms, s or m, e.g. 30s");
}

Expected<bool> parse_bool(std::string_view text) {
  std::string lowered = lower(text);
  for (std::string_view yes : {"1", "on", "yes", "true", "y"})
    if (lowered == yes) return true;
  for (std::string_view no : {"0", "off", "no", "false", "n"})
    if (lowered == no) return false;
  return make_error(Errc::config, fmt::format("'{}' is not a boolean", text),
                    "write on or off");
}

std::string format_size(std::uint64_t bytes) {
  if (bytes == std::numeric_limits<std::uint64_t>::max()) return "unlimited";
  constexpr std::pair<char, int> kUnits[] = {{'T', 40}, {'G', 30}, {'M', 20}, {'K', 10}};
  for (auto [letter, shift] : kUnits) {
    std::uint64_t unit = std::uint64_t{1} << shift;
    if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes >> shift, letter);
  }
  return fmt::format("{}", bytes);
}

std::string_view closest_option(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const Option& option : table()) {
    std::size_t distance = edit_distance(name, option.name);
    if (distance < best_distance) {
      best_distance = distance;
      best = option.name;
    }
  }
  return best;
}

Config Config::from_environment(char** environment) {
  Config config;
  for (const Option& option : table()) {
    auto parsed = parse_value(option, option.default_value);
    if (!parsed) std::abort();  // a bad default in the table is a build defect
    config.values_.push_back(std::move(*parsed));
  }
  for (char** entry = environment; entry && *entry; ++entry) {
    std::string_view assignment(*entry);
    if (assignment.substr(0, kPrefix.size()) != kPrefix) continue;
    auto equals = assignment.find('=');
    if (equals == std::string_view::npos) continue;
    config.apply(assignment.substr(0, equals), assignment.substr(equals + 1));
  }
  return config;
}

void Config::apply(std::string_view name, std::string_view literal) {
  std::size_t index = index_of(name);
  if (index == table().size()) return warn_unknown(name);
  auto parsed = parse_value(table()[index], literal);
  if (!parsed) {
    warnings_.push_back(fmt::format("{}={}: {}; using the default {}", name, literal,
                                    parsed.error().message(), table()[index].default_value));
    return;
  }
  parsed->from_environment = true;
  values_[index] = std::move(*parsed);
}

void Config::warn_unknown(std::string_view name) {
  warnings_.push_back(fmt::format("{} is set but no tether option has that name; did you mean {}? "
                                  "(tether-info -c lists every option)",
                                  name, closest_option(name)));
}

const Config& Config::global() {
  static const Config config = from_environment(environ);
  return config;
}

const Value& Config::value_of(std::string_view name, Kind expected) const {
  std::size_t index = index_of(name);
  if (index == table().size() || table()[index].kind != expected) {
    std::fprintf(stderr, "tether: internal error: option %.*s read with the wrong kind\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return values_[index];
}

std::uint64_t Config::size_bytes(std::string_view name) const { return value_of(name, Kind::size).number; }
bool Config::flag(std::string_view name) const { return value_of(name, Kind::boolean).number != 0; }
std::int64_t Config::integer(std::string_view name) const {
  return static_cast<std::int64_t>(value_of(name, Kind::integer).number);
}
std::string_view Config::choice(std::string_view name) const { return value_of(name, Kind::choice).text; }
std::string_view Config::text(std::string_view name) const { return value_of(name, Kind::text).text; }
std::chrono::nanoseconds Config::duration(std::string_view name) const {
  return std::chrono::nanoseconds(value_of(name, Kind::duration).number);
}
bool Config::is_set(std::string_view name) const {
  std::size_t index = index_of(name);
  return index < values_.size() && values_[index].from_environment;
}

std::string Config::dump() const {
  std::string out;
  auto options = table();
  for (std::size_t i = 0; i < options.size(); ++i) {
    const Option& option = options[i];
    out += fmt::format("# {}\n", option.doc);
    if (!option.choices.empty()) out += fmt::format("# one of: {}\n", option.choices);
    out += fmt::format("# default: {}{}\n", option.default_value,
                       values_[i].from_environment ? " (set from the environment)" : "");
    out += fmt::format("{}={}\n\n", option.name, values_[i].text);
  }
  return out;
}

}  // namespace tether::config
