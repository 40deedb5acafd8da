// The output of the persistent-channel benchmarks: OSU-style tables (one latency and one
// bandwidth table per API measured), CSV rows or one JSON object, printed by rank 0.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "apps/bench/persist_options.hpp"

namespace tether::bench {

// One way of sending measured in the run, e.g. {"channel", "tether persistent channel", ...}.
struct MeasuredApi {
  std::string key;     // the CSV/JSON `api` value
  std::string title;   // table titles: "# <title> Latency Test"
  std::string detail;  // one `#` line: how it was set up
};

struct Figure {
  std::string api;  // a MeasuredApi key
  std::size_t bytes = 0;
  double latency_us = 0;     // one-way: half the mean round trip
  double bandwidth_mbs = 0;  // MB = 10^6 B
};

struct ReportSettings {
  std::string program;
  std::string transport;  // what carried the messages, for the header
  std::vector<MeasuredApi> apis;
  std::vector<std::string> notes;  // more `#` lines of the table output (e.g. counters)
};

void print_report(const PersistOptions& options, const ReportSettings& settings, std::span<const Figure> figures);

}  // namespace tether::bench
