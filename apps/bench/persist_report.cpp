// Tables, CSV and JSON of the persistent-channel benchmarks.
#include "apps/bench/persist_report.hpp"

#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace tether::bench {
namespace {

std::string json_string(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    if (static_cast<unsigned char>(c) < 0x20) quoted += fmt::format("\\u{:04x}", static_cast<int>(c));
    else quoted += c;
  }
  return quoted + "\"";
}

void print_settings(const PersistOptions& options, const ReportSettings& settings) {
  fmt::print("# {}: ranks 0 and 1 over {}\n", settings.program, settings.transport);
  fmt::print("# latency: {} round trips up to 8 KiB (warm-up {}); bandwidth: {} windows of {} up to 64 KiB "
             "(warm-up {}); fewer above\n",
             options.latency_iterations, options.latency_warmup, options.bandwidth_iterations, options.window,
             options.bandwidth_warmup);
  for (const MeasuredApi& api : settings.apis) fmt::print("# {}: {}\n", api.key, api.detail);
  fmt::print("# every size verified first: checksummed patterns both ways\n");
  for (const std::string& note : settings.notes) fmt::print("# {}\n", note);
}

void print_table(const MeasuredApi& api, Test test, std::span<const Figure> figures) {
  bool latency = test == Test::latency;
  fmt::print("\n# {} {} Test\n", api.title, latency ? "Latency" : "Bandwidth");
  fmt::print("{}\n", latency ? "# Size          Latency (us)" : "# Size      Bandwidth (MB/s)");
  for (const Figure& figure : figures)
    if (figure.api == api.key)
      fmt::print("{:<10}{:>18.2f}\n", figure.bytes, latency ? figure.latency_us : figure.bandwidth_mbs);
}

void print_tables(const PersistOptions& options, const ReportSettings& settings, std::span<const Figure> figures) {
  print_settings(options, settings);
  for (Test test : {Test::latency, Test::bandwidth})
    for (const MeasuredApi& api : settings.apis) print_table(api, test, figures);
}

void print_csv(std::span<const Figure> figures) {
  fmt::print("api,size_bytes,latency_us,bandwidth_mbs\n");
  for (const Figure& figure : figures)
    fmt::print("{},{},{:.3f},{:.2f}\n", figure.api, figure.bytes, figure.latency_us, figure.bandwidth_mbs);
}

std::string json_settings(const PersistOptions& options, const ReportSettings& settings) {
  return fmt::format("\"program\": {}, \"transport\": {}, \"latency_iterations\": {}, \"bandwidth_iterations\": {}, "
                     "\"window\": {}, \"latency_slots\": {}, \"bandwidth_slots\": {}",
                     json_string(settings.program), json_string(settings.transport), options.latency_iterations,
                     options.bandwidth_iterations, options.window, options.latency_slots, streaming_slots(options));
}

void print_json(const PersistOptions& options, const ReportSettings& settings, std::span<const Figure> figures) {
  fmt::print("{{{}, \"results\": [", json_settings(options, settings));
  const char* separator = "";
  for (const Figure& figure : figures) {
    fmt::print("{}\n  {{\"api\": {}, \"size_bytes\": {}, \"latency_us\": {:.3f}, \"bandwidth_mbs\": {:.2f}}}",
               separator, json_string(figure.api), figure.bytes, figure.latency_us, figure.bandwidth_mbs);
    separator = ",";
  }
  fmt::print("\n]}}\n");
}

}  // namespace

void print_report(const PersistOptions& options, const ReportSettings& settings, std::span<const Figure> figures) {
  switch (options.output) {
    case OutputFormat::table: print_tables(options, settings, figures); break;
    case OutputFormat::csv: print_csv(figures); break;
    case OutputFormat::json: print_json(options, settings, figures); break;
  }
  std::fflush(stdout);
}

}  // namespace tether::bench
