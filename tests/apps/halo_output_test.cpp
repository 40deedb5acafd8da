// Argument parsing, the --comm registry, the report formats and the PNG writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "apps/comm/registry.hpp"
#include "apps/core/arguments.hpp"
#include "apps/core/heatmap.hpp"
#include "apps/core/report.hpp"

namespace tether::apps {
namespace {

TEST(HaloArgumentsTest, ParsesValuesFlagsAndShapes) {
  std::int64_t radius = 0;
  bool json = false;
  std::vector<ArgumentSpec> specs = {
      {"--radius", "R", "radius", [&](std::string_view v) -> Expected<void> {
         auto value = parse_count("--radius", v, 1, 16);
         if (!value) return tl::unexpected(value.error());
         radius = *value;
         return {};
       }},
      {"--json", "", "json", [&](std::string_view) -> Expected<void> {
         json = true;
         return {};
       }},
  };
  const char* argv[] = {"app", "--radius=3", "--json"};
  auto parsed = parse_arguments(3, const_cast<char**>(argv), specs);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(*parsed);
  EXPECT_EQ(radius, 3);
  EXPECT_TRUE(json);
  const char* bad[] = {"app", "--radius", "0"};
  auto refused = parse_arguments(3, const_cast<char**>(bad), specs);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().cause.find("--radius 0"), std::string::npos);
  const char* unknown[] = {"app", "--radios", "2"};
  EXPECT_FALSE(parse_arguments(3, const_cast<char**>(unknown), specs));
  const char* missing[] = {"app", "--radius"};
  EXPECT_FALSE(parse_arguments(2, const_cast<char**>(missing), specs));
  EXPECT_EQ(*parse_shape("--procs", "3x2", 2, 1, 8), (std::vector<std::int64_t>{3, 2}));
  EXPECT_FALSE(parse_shape("--procs", "3x2", 3, 1, 8));
  EXPECT_FALSE(parse_shape("--procs", "3x0", 2, 1, 8));
  EXPECT_FALSE(parse_shape("--procs", "3x", 2, 1, 8));
  EXPECT_FALSE(parse_shape("--procs", "3x9", 2, 1, 8));
  EXPECT_EQ(*parse_non_negative("--compute-us", "2.5", 10), 2.5);
  for (std::string_view endless : {"inf", "infinity", "nan", "11", "-1"})
    EXPECT_FALSE(parse_non_negative("--compute-us", endless, 10)) << endless;
}

TEST(HaloRegistryTest, TetherModesAreBuiltAndPersistIsTheDefault) {
  EXPECT_EQ(default_comm_mode(), "persist");
  for (std::string_view name : {"persist", "sendrecv"}) {
    auto mode = find_comm_mode(name);
    ASSERT_TRUE(mode);
    EXPECT_TRUE((*mode)->built) << name;
  }
  std::string help = describe_comm_modes();
  std::size_t persist_line = help.find("  persist ");
  ASSERT_NE(persist_line, std::string::npos);
  std::string line = help.substr(persist_line, help.find('\n', persist_line) - persist_line);
  EXPECT_EQ(line.find("not built yet"), std::string::npos) << line;
  auto unknown = find_comm_mode("tcp");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().remedy.find("mpi-persist"), std::string::npos);
}

TEST(HaloReportTest, SummaryTakesMinAndMedianOverRanks) {
  Problem problem{2, {100, 100, 1}, {3, 1, 1}, 1, 1, 10, 0};
  std::vector<RankReport> reports = {{1.0, 0.5, 0.5, 800, 1, 0, 1, 1.25}, {2.0, 0.5, 1.5, 800, 2, 0, 1, 0.5},
                                     {3.0, 0.3, 2.7, 800, 3, 0, 1, 1.125}};
  RunSummary summary = summarise(reports, problem);
  EXPECT_DOUBLE_EQ(summary.iteration_us_min, 1e5);
  EXPECT_DOUBLE_EQ(summary.iteration_us_median, 2e5);
  EXPECT_DOUBLE_EQ(summary.comm_share_percent, 25.0);
  EXPECT_DOUBLE_EQ(summary.halo_bytes_per_s, 2400 / 0.2);
  EXPECT_DOUBLE_EQ(summary.mflops, 1e4 * 6 / 0.2 / 1e6);
  EXPECT_EQ(summary.checksum, 6u);
  EXPECT_DOUBLE_EQ(summary.paired_speedup, 1.125);
  summary.app = "halo2d";
  summary.comm = "mpi";
  summary.verification = "said \"ok\"";
  std::string json = format_summary(summary, OutputFormat::json);
  EXPECT_NE(json.find("\"iteration_us\": {\"min\": 100000.000, \"median\": 200000.000}"), std::string::npos) << json;
  EXPECT_NE(json.find("said \\\"ok\\\""), std::string::npos);
  EXPECT_NE(format_summary(summary, OutputFormat::table).find("# Comm"), std::string::npos);
  summary.overlap = false;
  EXPECT_NE(format_summary(summary, OutputFormat::json).find("\"overlap\": false"), std::string::npos);
  EXPECT_NE(format_summary(summary, OutputFormat::table).find(" overlap=off\n"), std::string::npos);
  std::string csv = format_summary(summary, OutputFormat::csv);
  EXPECT_NE(csv.find(",verified,overlap,paired_speedup\n"), std::string::npos) << csv;
  EXPECT_EQ(csv.substr(csv.size() - 12), ",off,1.1250\n") << csv;
  EXPECT_NE(format_summary(summary, OutputFormat::json).find("\"paired_speedup\": 1.1250}"), std::string::npos);
}

// Each round's ratio leaves out what the machine did in other rounds: with one lucky round
// for the reference, the fastest rounds taken apart say 2/3, the pairs 1 (ratios 2/3, 1, 1).
TEST(HaloReportTest, PairedSpeedupIsTheMedianOfEachRoundsRatio) {
  std::vector<double> reference = {2.0, 6.0, 9.0};
  std::vector<double> mode = {3.0, 6.0, 9.0};
  EXPECT_DOUBLE_EQ(paired_speedup(reference, mode), 1.0);
  EXPECT_DOUBLE_EQ(paired_speedup(reference, reference), 1.0);
  EXPECT_DOUBLE_EQ(paired_speedup(std::vector<double>{4.0, 4.0}, std::vector<double>{2.0, 1.0}), 3.0);
  EXPECT_DOUBLE_EQ(paired_speedup(reference, {}), 1.0);  // no round in common
}

// Several modes of one job: one table header naming them all and a row each, one CSV
// header, a JSON array.
TEST(HaloReportTest, ModesOfOneJobShareOneHeaderAndGetARowEach) {
  Problem problem{2, {100, 100, 1}, {2, 1, 1}, 1, 1, 10, 0};
  std::vector<RankReport> fast = {{1.0, 0.1, 0.9, 800, 7, 0, 1}, {1.0, 0.1, 0.9, 800, 7, 0, 1}};
  std::vector<RankReport> slow = {{2.0, 1.1, 0.9, 800, 7, 0, 1}, {2.0, 1.1, 0.9, 800, 7, 0, 1}};
  std::vector<RunSummary> summaries = {summarise(fast, problem), summarise(slow, problem)};
  summaries[0].comm = "persist";
  summaries[1].comm = "mpi";
  std::string table = format_summaries(summaries, OutputFormat::table);
  EXPECT_NE(table.find(" comm=persist,mpi "), std::string::npos) << table;
  EXPECT_EQ(table.find("# Comm"), table.rfind("# Comm")) << table;
  EXPECT_NE(table.find("\npersist "), std::string::npos) << table;
  EXPECT_NE(table.find("\nmpi "), std::string::npos) << table;
  std::string csv = format_summaries(summaries, OutputFormat::csv);
  EXPECT_EQ(csv.find("app,comm"), csv.rfind("app,comm")) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  EXPECT_NE(csv.find(",persist,2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",mpi,2,"), std::string::npos) << csv;
  std::string json = format_summaries(summaries, OutputFormat::json);
  EXPECT_EQ(json.front(), '[') << json;
  EXPECT_EQ(json.substr(json.size() - 2), "]\n") << json;
  EXPECT_NE(json.find("\"comm\": \"mpi\""), std::string::npos) << json;
  EXPECT_EQ(format_summaries(std::span(summaries).first(1), OutputFormat::json).front(), '{');
}

// A mode whose field differs fails them all, naming every mode's checksum; equal fields
// change nothing.
TEST(HaloReportTest, ModesWhoseFieldsDifferAreAllNotVerified) {
  std::vector<RunSummary> summaries(3);
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    summaries[i].comm = i == 0 ? "mpi" : i == 1 ? "persist" : "sendrecv";
    summaries[i].checksum = 0xabc;
    summaries[i].verified = true;
  }
  require_identical_fields(summaries);
  for (const RunSummary& s : summaries) EXPECT_TRUE(s.verified) << s.comm;
  summaries[0].checksum = 0xdef;  // the first mode is the odd one out
  require_identical_fields(summaries);
  for (const RunSummary& s : summaries) {
    EXPECT_FALSE(s.verified) << s.comm;
    EXPECT_NE(s.verification.find("mpi 0x0000000000000def, persist 0x0000000000000abc, sendrecv 0x0000000000000abc"),
              std::string::npos)
        << s.verification;
  }
}

TEST(HaloHeatmapTest, WritesAPngWithTheGridsShape) {
  std::vector<double> values(30 * 20);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 30);
  std::string path = ::testing::TempDir() + "halo-heatmap-test.png";
  ASSERT_TRUE(write_heatmap_png(path, values, {30, 20}));
  std::ifstream file(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes[1], 'P');
  EXPECT_EQ(bytes[19], 30);  // IHDR width, big-endian
  EXPECT_EQ(bytes[23], 20);  // IHDR height
  std::remove(path.c_str());
  auto refused = write_heatmap_png("/nonexistent-dir/x.png", values, {30, 20});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().cause.find("cannot open"), std::string::npos);
}

TEST(HaloHeatmapTest, LargeGridsAreScaledToAtMost800Pixels) {
  Problem problem{2, {8000, 4000, 1}, {1, 1, 1}, 1, 1, 1, 0};
  HeatmapSize size = heatmap_size(problem);
  EXPECT_EQ(size.width, 800);
  EXPECT_EQ(size.height, 400);
}

}  // namespace
}  // namespace tether::apps
