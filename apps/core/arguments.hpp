// Command-line parsing for the apps: "--name value", "--name=value" and flags, from a
// table of options, plus parsers for counts and "AxB[xC]" shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tether/error.hpp"

namespace tether::apps {

struct ArgumentSpec {
  std::string_view name;        // "--radius"
  std::string_view value_name;  // "R"; empty for a flag
  std::string doc;
  std::function<Expected<void>(std::string_view value)> apply;
};

// Applies every argument; returns false when --help was asked for.
[[nodiscard]] Expected<bool> parse_arguments(int argc, char** argv, std::span<const ArgumentSpec> specs);
[[nodiscard]] std::string usage_text(std::string_view app, std::string_view summary, std::span<const ArgumentSpec> specs);

// A whole number in [minimum, maximum].
[[nodiscard]] Expected<std::int64_t> parse_count(std::string_view option, std::string_view text, std::int64_t minimum,
                                                 std::int64_t maximum);
// A finite number in [0, maximum] ("inf" and "nan" are refused).
[[nodiscard]] Expected<double> parse_non_negative(std::string_view option, std::string_view text, double maximum);
// "AxB" (parts == 2) or "AxBxC" (parts == 3), each in [minimum, maximum].
[[nodiscard]] Expected<std::vector<std::int64_t>> parse_shape(std::string_view option, std::string_view text, int parts,
                                                              std::int64_t minimum, std::int64_t maximum);

}  // namespace tether::apps
