// The options halo2d and halo3d share.
#include <fmt/format.h>

#include "apps/comm/registry.hpp"
#include "apps/core/halo_app.hpp"

namespace tether::apps {
namespace {

constexpr std::int64_t kMostRanksPerAxis = std::int64_t{1} << 20;  // three of them multiply within int64
constexpr double kMostComputeMicroseconds = 1e6;                    // a second per iteration

Expected<void> set_int(int& target, std::string_view option, std::string_view text, std::int64_t minimum,
                       std::int64_t maximum) {
  auto value = parse_count(option, text, minimum, maximum);
  if (!value) return tl::unexpected(value.error());
  target = static_cast<int>(*value);
  return {};
}

Expected<VerifyMode> parse_verify_mode(std::string_view text) {
  if (text == "auto") return VerifyMode::automatic;
  if (text == "serial") return VerifyMode::serial;
  if (text == "analytic") return VerifyMode::analytic;
  if (text == "none") return VerifyMode::none;
  return make_error(Errc::invalid_argument, fmt::format("--verify {}: not a verification mode", text),
                    "use --verify auto, serial, analytic or none");
}

}  // namespace

ArgumentSpec procs_argument(AppOptions& options, int dimensions) {
  std::string_view value_name = dimensions == 2 ? "PXxPY" : "PXxPYxPZ";
  std::string doc = fmt::format("process grid (default: as {} as possible)", dimensions == 2 ? "square" : "cubic");
  return {"--procs", value_name, std::move(doc), [&options, dimensions](std::string_view v) -> Expected<void> {
            auto shape = parse_shape("--procs", v, dimensions, 1, kMostRanksPerAxis);
            if (!shape) return tl::unexpected(shape.error());
            for (int axis = 0; axis < 3; ++axis)
              options.problem.procs[static_cast<std::size_t>(axis)] =
                  axis < dimensions ? static_cast<int>((*shape)[static_cast<std::size_t>(axis)]) : 1;
            options.procs_given = true;
            return {};
          }};
}

std::vector<ArgumentSpec> common_arguments(AppOptions& options) {
  Problem& problem = options.problem;
  return {
      {"--iterations", "N", "stencil iterations (one halo exchange each)",
       [&](std::string_view v) { return set_int(problem.iterations, "--iterations", v, 1, 1 << 30); }},
      {"--fields", "F", "independent fields per cell, sent in the same messages",
       [&](std::string_view v) { return set_int(problem.fields, "--fields", v, 1, 64); }},
      {"--compute-us", "T", "extra arithmetic per iteration, in microseconds (default 0)",
       [&](std::string_view v) -> Expected<void> {
         auto value = parse_non_negative("--compute-us", v, kMostComputeMicroseconds);
         if (!value) return tl::unexpected(value.error());
         problem.compute_us = *value;
         return {};
       }},
      {"--comm", "MODE[,MODE...]",
       fmt::format("how halos move (default: {}); several modes run in this one job, on the same processes "
                   "and memory, taking turns (--rounds); modes:\n{}",
                   default_comm_mode(), describe_comm_modes()),
       [&](std::string_view v) -> Expected<void> {
         options.comm = std::string(v);
         return {};
       }},
      {"--rounds", "R", "runs of every --comm mode, taking turns; each rank keeps its fastest (default 1)",
       [&](std::string_view v) { return set_int(options.rounds, "--rounds", v, 1, 1000); }},
      {"--overlap", "on|off",
       "on (default): compute the cells that need no halo while the halos travel; off: exchange first",
       [&](std::string_view v) -> Expected<void> {
         if (v != "on" && v != "off")
           return make_error(Errc::invalid_argument, fmt::format("--overlap {}: not on or off", v),
                             "use --overlap on or --overlap off");
         options.overlap = v == "on";
         return {};
       }},
      {"--verify", "MODE",
       "auto (analytic check, plus the serial reference on grids up to 4M values), serial, analytic or none",
       [&](std::string_view v) -> Expected<void> {
         auto mode = parse_verify_mode(v);
         if (!mode) return tl::unexpected(mode.error());
         options.verify = *mode;
         return {};
       }},
      {"--json", "", "print the results as one JSON object",
       [&](std::string_view) -> Expected<void> {
         options.format = OutputFormat::json;
         return {};
       }},
      {"--csv", "", "print the results as a CSV header and row",
       [&](std::string_view) -> Expected<void> {
         options.format = OutputFormat::csv;
         return {};
       }},
      {"--png", "FILE", "write a heat map of the final field 0 to FILE",
       [&](std::string_view v) -> Expected<void> {
         options.png_path = std::string(v);
         return {};
       }},
      {"--inject-fault", "FAULT",
       "TEST ONLY: stale-ghosts (rank 1 skips one halo unpack, so verification must fail) or killed (rank 1 "
       "kills itself with SIGKILL halfway)",
       [&](std::string_view v) -> Expected<void> {
         if (v != "stale-ghosts" && v != "killed")
           return make_error(Errc::invalid_argument, fmt::format("--inject-fault {}: unknown fault", v),
                             "the faults are stale-ghosts and killed");
         options.fault = v == "killed" ? Fault::killed : Fault::stale_ghosts;
         return {};
       }},
  };
}

}  // namespace tether::apps
