#include <gtest/gtest.h>

#include "runtime/base/config.hpp"

namespace tether::config {
namespace {

Config parse(std::vector<std::string> assignments) {
  std::vector<char*> environment;
  for (auto& assignment : assignments) environment.push_back(assignment.data());
  environment.push_back(nullptr);
  return Config::from_environment(environment.data());
}

TEST(ConfigTest, SizesAcceptBinarySuffixes) {
  EXPECT_EQ(*parse_size("64M"), 64u << 20);
  EXPECT_EQ(*parse_size("2MiB"), 2u << 20);
  EXPECT_EQ(*parse_size("1g"), 1ull << 30);
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("auto"), 0u);
  EXPECT_EQ(*parse_size("unlimited"), UINT64_MAX);
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size("M"));
  EXPECT_EQ(parse_size("99999999999999999999").error().code, Errc::config);
  EXPECT_FALSE(parse_size("20000000T"));  // overflows 64 bits
}

TEST(ConfigTest, DurationsNeedAUnit) {
  EXPECT_EQ(*parse_duration_ns("30s"), 30'000'000'000u);
  EXPECT_EQ(*parse_duration_ns("5ms"), 5'000'000u);
  EXPECT_EQ(*parse_duration_ns("0"), 0u);
  EXPECT_FALSE(parse_duration_ns("30"));
}

TEST(ConfigTest, EnvironmentOverridesDefaults) {
  Config config = parse({"TETHER_POOL_SIZE=16M", "TETHER_LOG_LEVEL=INFO", "PATH=/bin"});
  EXPECT_EQ(config.size_bytes("TETHER_POOL_SIZE"), 16u << 20);
  EXPECT_TRUE(config.is_set("TETHER_POOL_SIZE"));
  EXPECT_EQ(config.choice("TETHER_LOG_LEVEL"), "info");
  EXPECT_FALSE(config.is_set("TETHER_POOL_MAX"));
  EXPECT_TRUE(config.warnings().empty());
}

TEST(ConfigTest, UnknownVariableWarnsWithClosestName) {
  Config config = parse({"TETHER_POOL_SIZ=16M"});
  ASSERT_EQ(config.warnings().size(), 1u);
  EXPECT_NE(config.warnings()[0].find("did you mean TETHER_POOL_SIZE"), std::string::npos)
      << config.warnings()[0];
}

TEST(ConfigTest, BadValueKeepsDefaultAndNamesTheFix) {
  Config config = parse({"TETHER_POOL_BACKING=floppy", "TETHER_POOL_SIZE=lots"});
  ASSERT_EQ(config.warnings().size(), 2u);
  EXPECT_EQ(config.choice("TETHER_POOL_BACKING"), "auto");
  EXPECT_NE(config.warnings()[0].find("pick one of"), std::string::npos) << config.warnings()[0];
  EXPECT_NE(config.warnings()[1].find("suffix"), std::string::npos) << config.warnings()[1];
}

TEST(ConfigTest, DumpIsPasteable) {
  Config config = parse({"TETHER_POOL_SIZE=16M"});
  std::string dump = config.dump();
  for (const Option& option : table())
    EXPECT_NE(dump.find(std::string(option.name) + "="), std::string::npos) << option.name;
  EXPECT_NE(dump.find("TETHER_POOL_SIZE=16M\n"), std::string::npos);
}

}  // namespace
}  // namespace tether::config
