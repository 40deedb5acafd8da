// Parses `tether-run -n N [--timeout D] [--kill-after D] [--tag-output] [--bind-to auto|core|none]
// [--netns A,B] program args...`.
#include "launch/launch_options.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::launch {
namespace {

Error usage_error(std::string cause) {
  return Error{Errc::invalid_argument, 0, std::move(cause), "run `tether-run --help` for the usage"};
}

Expected<int> parse_rank_count(std::string_view text) {
  int ranks = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ranks);
  if (error != std::errc() || end != text.data() + text.size() || ranks < 1 || ranks > 4096)
    return tl::unexpected(usage_error(fmt::format("-n '{}' is not a rank count from 1 to 4096", text)));
  return ranks;
}

Expected<std::chrono::nanoseconds> parse_duration(std::string_view flag, std::string_view text) {
  auto parsed = config::parse_duration_ns(text);
  if (!parsed) {
    return tl::unexpected(
        usage_error(fmt::format("{} '{}' is not a duration: give a number with a unit, e.g. 30s or 2m", flag, text)));
  }
  constexpr std::uint64_t kYearMinutes = 365 * 24 * 60;  // longer could overflow the clock's deadline
  if (*parsed > kYearMinutes * 60'000'000'000)
    return tl::unexpected(usage_error(fmt::format("{} '{}' is longer than a year: give at most {}m{}", flag, text,
                                                  kYearMinutes, flag == "--timeout" ? " (0: no timeout)" : "")));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(*parsed));
}

Expected<std::vector<std::string>> parse_namespace_list(std::string_view text) {
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view name = text.substr(start, comma - start);
    if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..")
      return tl::unexpected(usage_error(fmt::format("--netns '{}' is not a comma-separated list of namespace names", text)));
    if (std::find(names.begin(), names.end(), name) != names.end())
      return tl::unexpected(usage_error(fmt::format("--netns names '{}' twice: each host is one namespace", name)));
    names.emplace_back(name);
    start = comma + 1;
  }
  return names;
}

// Applies one flag that takes a value; returns false when `flag` is not one of them.
Expected<bool> apply_valued_flag(LaunchOptions& options, std::string_view flag, std::string_view value) {
  if (flag == "-n" || flag == "-np") {
    auto ranks = parse_rank_count(value);
    if (!ranks) return tl::unexpected(ranks.error());
    options.ranks = *ranks;
  } else if (flag == "--timeout" || flag == "--kill-after") {
    auto duration = parse_duration(flag, value);
    if (!duration) return tl::unexpected(duration.error());
    (flag == "--timeout" ? options.timeout : options.kill_after) = *duration;
  } else if (flag == "--bind-to") {
    if (value != "auto" && value != "core" && value != "none")
      return tl::unexpected(usage_error(fmt::format("--bind-to '{}' is not auto, core or none", value)));
    options.binding = value == "core" ? Binding::core : value == "none" ? Binding::none : Binding::automatic;
  } else if (flag == "--netns") {
    auto names = parse_namespace_list(value);
    if (!names) return tl::unexpected(names.error());
    options.netns = std::move(*names);
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string usage_text() {
  return "usage: tether-run -n N [--timeout DURATION] [--kill-after DURATION] [--tag-output]\n"
         "                  [--bind-to auto|core|none] [--netns NS1,NS2,...] program [args...]\n"
         "Starts N ranks of `program` on this node under an embedded PMIx server.\n"
         "  -n, -np N             number of ranks (1 to 4096)\n"
         "  --timeout DURATION    stop the job after DURATION (e.g. 30s, 5m); exit code 124\n"
         "  --kill-after DURATION after a rank fails, how long the others may run before\n"
         "                        SIGTERM, then SIGKILL 2 s later (default 10s)\n"
         "  --tag-output          prefix every output line with \"[rank R] \"\n"
         "  --bind-to auto|core|none\n"
         "                        core: rank r runs only on the r-th CPU this launcher may\n"
         "                        use (as mpirun binds up to 2 ranks); none: the kernel\n"
         "                        places the ranks; auto (default): core for a job of 2\n"
         "                        ranks that fit those CPUs, none otherwise. Bound ranks\n"
         "                        get TETHER_YIELD=off unless it is set\n"
         "  --netns NS1,NS2,...   one host per network namespace (/run/netns/NAME): rank r\n"
         "                        runs in namespace r % count; ranks on different hosts\n"
         "                        talk over the network transport\n"
         "  --oversubscribe       accepted for mpirun habits; ranks may outnumber cores\n"
         "  --                    ends the options: the program follows\n"
         "The exit code is 0 when every rank exits 0; otherwise the first failure's exit\n"
         "code, or 128+signal for a rank killed by a signal.\n";
}

Expected<LaunchOptions> parse_command_line(int argc, char** argv) {
  LaunchOptions options;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string_view flag(argv[i]);
    if (flag == "--") {  // the program follows, even one whose name starts with '-'
      ++i;
      break;
    }
    if (flag == "-h" || flag == "--help") {
      options.show_help = true;
      return options;
    }
    if (flag == "--tag-output") {
      options.tag_output = true;
      continue;
    }
    if (flag == "--oversubscribe") continue;  // mpirun's habit; one node always takes N ranks
    if (flag.starts_with("--tag-output=") || flag.starts_with("--oversubscribe="))
      return tl::unexpected(usage_error(fmt::format("'{}': {} takes no value", flag, flag.substr(0, flag.find('=')))));
    if (flag.starts_with("-n=") || flag.starts_with("-np="))
      return tl::unexpected(usage_error(fmt::format("'{}': give the rank count after a space (-n 4)", flag)));
    std::string_view value;
    if (auto equals = flag.find('='); equals != std::string_view::npos && flag.starts_with("--")) {
      value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      LaunchOptions scratch;  // an option that takes no value is unknown
      auto known = apply_valued_flag(scratch, flag, "");
      return tl::unexpected(usage_error(known && !*known ? fmt::format("unknown option '{}'", flag)
                                                         : fmt::format("{} needs a value", flag)));
    }
    auto applied = apply_valued_flag(options, flag, value);
    if (!applied) return tl::unexpected(applied.error());
    if (!*applied) return tl::unexpected(usage_error(fmt::format("unknown option '{}'", flag)));
  }
  if (options.ranks == 0) return tl::unexpected(usage_error("missing -n N, the number of ranks"));
  if (i == argc) return tl::unexpected(usage_error("missing the program to run"));
  options.command.assign(argv + i, argv + argc);
  return options;
}

}  // namespace tether::launch
