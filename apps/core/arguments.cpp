#include "apps/core/arguments.hpp"

#include <charconv>

#include <fmt/format.h>

namespace tether::apps {
namespace {

const ArgumentSpec* find_spec(std::span<const ArgumentSpec> specs, std::string_view name) {
  for (const ArgumentSpec& spec : specs)
    if (spec.name == name) return &spec;
  return nullptr;
}

tl::unexpected<Error> bad_value(std::string_view option, std::string_view text, std::string_view expected) {
  return make_error(Errc::invalid_argument, fmt::format("{} {}: not {}", option, text, expected),
                    fmt::format("give {} {}", option, expected));
}

}  // namespace

Expected<bool> parse_arguments(int argc, char** argv, std::span<const ArgumentSpec> specs) {
  for (int i = 1; i < argc; ++i) {
    std::string_view argument = argv[i];
    if (argument == "--help" || argument == "-h") return false;
    std::string_view name = argument, value;
    bool inline_value = false;
    if (auto equals = argument.find('='); equals != std::string_view::npos) {
      name = argument.substr(0, equals);
      value = argument.substr(equals + 1);
      inline_value = true;
    }
    const ArgumentSpec* spec = find_spec(specs, name);
    if (spec == nullptr) {
      return make_error(Errc::invalid_argument, fmt::format("unknown argument '{}'", argument),
                        "run with --help for the list of options");
    }
    if (!spec->value_name.empty() && !inline_value) {
      if (i + 1 >= argc) {
        return make_error(Errc::invalid_argument, fmt::format("{} needs a value", name),
                          fmt::format("write {} {}", name, spec->value_name));
      }
      value = argv[++i];
    }
    if (auto applied = spec->apply(value); !applied) return tl::unexpected(applied.error());
  }
  return true;
}

std::string usage_text(std::string_view app, std::string_view summary, std::span<const ArgumentSpec> specs) {
  std::string text = fmt::format("usage: mpirun -n RANKS {} [options]\n{}\n\noptions:\n", app, summary);
  for (const ArgumentSpec& spec : specs) {
    std::string left = spec.value_name.empty() ? std::string(spec.name) : fmt::format("{} {}", spec.name, spec.value_name);
    text += fmt::format("  {:<24} {}\n", left, spec.doc);
  }
  return text;
}

Expected<std::int64_t> parse_count(std::string_view option, std::string_view text, std::int64_t minimum,
                                   std::int64_t maximum) {
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum || value > maximum) {
    return bad_value(option, text, fmt::format("a whole number from {} to {}", minimum, maximum));
  }
  return value;
}

Expected<double> parse_non_negative(std::string_view option, std::string_view text, double maximum) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value >= 0 && value <= maximum)) {
    return bad_value(option, text, fmt::format("a number from 0 to {}", maximum));
  }
  return value;
}

Expected<std::vector<std::int64_t>> parse_shape(std::string_view option, std::string_view text, int parts,
                                                std::int64_t minimum, std::int64_t maximum) {
  std::vector<std::int64_t> values;
  std::string_view rest = text;
  std::string_view expected = parts == 2 ? "of the form AxB (e.g. 3x2)" : "of the form AxBxC (e.g. 3x2x1)";
  while (true) {
    std::size_t cross = rest.find('x');
    auto value = parse_count(option, rest.substr(0, cross), minimum, maximum);
    if (!value) return bad_value(option, text, fmt::format("{}, each from {} to {}", expected, minimum, maximum));
    values.push_back(*value);
    if (cross == std::string_view::npos) break;
    rest = rest.substr(cross + 1);
  }
  if (static_cast<int>(values.size()) != parts) return bad_value(option, text, expected);
  return values;
}

}  // namespace tether::apps
