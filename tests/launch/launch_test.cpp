// Jobs that should succeed: tether-run with 1, 2 and 4 ranks, the pre-exchange option,
// tagged output, mpirun with 2 and 4 ranks, and the no-launcher error.

#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/base/cpus.hpp"
#include "runtime/bootstrap/pmix_values.hpp"
#include "tests/launch/launch_support.hpp"

namespace tether::testing {
namespace {

class TetherRunRanks : public ::testing::TestWithParam<int> {};

TEST_P(TetherRunRanks, EveryRankVerifiesEveryPeersValue) {
  const int ranks = GetParam();
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", std::to_string(ranks), "--timeout", "45s", launch_check(), "--expect-size",
                      std::to_string(ranks)},
                     {scratch.env()}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(count_verified_ranks(outcome.output, ranks), ranks) << outcome.output;
  EXPECT_TRUE(scratch.entries().empty()) << "tether-run left " << scratch.entries().front();
}

INSTANTIATE_TEST_SUITE_P(Launch, TetherRunRanks, ::testing::Values(1, 2, 4));

TEST(TetherRun, PreexchangeFenceGivesTheSameValues) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "4", "--timeout", "45s", launch_check(), "--expect-size", "4"},
                     {scratch.env(), "TETHER_BOOTSTRAP_PREEXCHANGE=1"}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(count_verified_ranks(outcome.output, 4), 4) << outcome.output;
}

TEST(TetherRun, TagOutputPrefixesEveryLineWithItsRank) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "3", "--tag-output", "--timeout", "45s", launch_check()}, {scratch.env()},
                     kWatchdog);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(outcome.output.find(fmt::format("[rank {}] launch-check rank {} of 3 ok", rank, rank)), std::string::npos)
        << outcome.output;
  }
}

// A rank holds its stdin, stdout and stderr, and no other descriptor of the launcher's
// (the /dev/null it reads stdin from stayed open as a fourth).
TEST(TetherRun, RanksInheritNoExtraDescriptor) {
  ScratchDir scratch;
  const char* close_inherited = "for fd in $(ls /proc/$$/fd); do [ $fd -gt 2 ] && eval \"exec $fd>&-\"; done; "
                                "exec \"$0\" \"$@\"";  // the test runner's own descriptors stay out
  auto outcome = run({"/bin/bash", "-c", close_inherited, tether_run(), "-n", "2", "--timeout", "45s", "/bin/sh", "-c",
                      "ls -l /proc/$$/fd"},
                     {scratch.env()}, kWatchdog);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  std::size_t nulls = 0;
  for (std::size_t at = 0; (at = outcome.output.find("/dev/null", at)) != std::string::npos; at += 9) ++nulls;
  EXPECT_EQ(nulls, 2u) << "one /dev/null (stdin) per rank expected\n" << outcome.output;
}

// A soft open-file limit too low for -n ranks (the launcher holds a few descriptors each)
// is raised for the job and its ranks instead of failing at the first pipe.
TEST(TetherRun, RaisesALowOpenFileLimitForManyRanks) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_max < 224)
    GTEST_SKIP() << "the hard open-file limit is below the 224 that 40 ranks need";
  ScratchDir scratch;
  auto outcome = run({"/bin/sh", "-c", "ulimit -Sn 64 && exec \"$0\" -n 40 --timeout 60s /bin/sh -c "
                      "'test $(ulimit -Sn) -ge 224 || echo \"open-file limit $(ulimit -Sn)\"'",
                      tether_run()},
                     {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(outcome.output.find("open-file limit"), std::string::npos) << outcome.output;
}

// Processes ranks leave behind (here in sessions of their own, out of the ranks' process
// groups) end with the job: the launcher adopts them (a child subreaper) and, once every rank
// ended, sends them SIGTERM, then SIGKILL to the one of each rank that ignores it. Before,
// they ran on after the job.
TEST(TetherRun, ProcessesRanksLeaveBehindEndWithTheJob) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "2", "--timeout", "45s", "/bin/sh", "-c",
                      "setsid sleep 300 & echo \"left $!\"; ready=/tmp/tether-launch-test.$$; "
                      "setsid sh -c 'trap \"\" TERM; touch \"$0\"; exec sleep 301' $ready & "
                      "until [ -e $ready ]; do sleep 0.01; done; rm $ready; echo \"left $!\""},
                     {scratch.env()}, kWatchdog);
  std::vector<pid_t> left, running;
  const std::regex left_line(R"((?:^|\n)left (\d+)(?=\n))");
  for (auto found = std::sregex_iterator(outcome.output.begin(), outcome.output.end(), left_line);
       found != std::sregex_iterator(); ++found)
    left.push_back(static_cast<pid_t>(std::stol((*found)[1])));
  for (pid_t pid : left)
    if (kill(pid, 0) == 0 && kill(pid, SIGKILL) == 0) running.push_back(pid);  // (the old launcher's leftovers)
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(left.size(), 4u) << outcome.output;
  EXPECT_TRUE(running.empty()) << running.size() << " processes still ran after the job\n" << outcome.output;
  EXPECT_NE(outcome.output.find("the ranks left 4 processes running"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("(SIGKILL)"), std::string::npos) << outcome.output;
}

TEST(TetherRun, BindToCoreGivesEachRankItsOwnCpu) {
  std::vector<int> cpus = base::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to bind 2 ranks; this process may use " << cpus.size();
  ScratchDir scratch;
  std::string report = "grep '^Cpus_allowed_list:' /proc/self/status; echo \"yield=$TETHER_YIELD\"";
  auto outcome = run({tether_run(), "-n", "2", "--bind-to", "core", "--tag-output", "--timeout", "45s", "/bin/sh", "-c",
                      report},
                     {scratch.env()}, kWatchdog);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(outcome.output.find(fmt::format("[rank {}] Cpus_allowed_list:\t{}\n", rank, cpus[rank])), std::string::npos)
        << outcome.output;
    EXPECT_NE(outcome.output.find(fmt::format("[rank {}] yield=off", rank)), std::string::npos) << outcome.output;
  }
  auto chosen = run({tether_run(), "-n", "1", "--bind-to", "core", "/bin/sh", "-c", report},
                    {scratch.env(), "TETHER_YIELD=on"}, kWatchdog);
  EXPECT_NE(chosen.output.find("yield=on"), std::string::npos) << "the user's TETHER_YIELD must win\n" << chosen.output;
}

TEST(TetherRun, BindToCoreRefusesMoreRanksThanCpus) {
  auto ranks = std::to_string(base::allowed_cpus().size() + 1);
  auto outcome = run({tether_run(), "-n", ranks, "--bind-to", "core", "/bin/true"}, {}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("--bind-to core gives each rank a CPU of its own, but " + ranks + " ranks"),
            std::string::npos)
      << outcome.output;
  EXPECT_NE(outcome.output.find("pass --bind-to auto or none"), std::string::npos) << outcome.output;
  auto bad = run({tether_run(), "-n", "2", "--bind-to", "socket", "/bin/true"}, {}, kWatchdog);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--bind-to 'socket' is not auto, core or none"), std::string::npos) << bad.output;
}

// Each rank's CPU mask and TETHER_YIELD, as "[rank R] Cpus_allowed_list:\t..." and
// "[rank R] yield=...", under tether-run with `options`.
std::string placement_report(const ScratchDir& scratch, std::vector<std::string> options) {
  std::vector<std::string> argv{tether_run(), "--tag-output", "--timeout", "45s"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"/bin/sh", "-c",
                           "grep '^Cpus_allowed_list:' /proc/self/status; echo \"yield=${TETHER_YIELD:-unset}\""});
  auto outcome = run(argv, {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  return outcome.output;
}

// The default, --bind-to auto: a job of 2 ranks is bound as by core (mpirun binds such jobs);
// a lone rank, a job of 3 and --bind-to none are not, and keep their TETHER_YIELD unset.
TEST(TetherRun, AutoBindsJobsOfTwoRanksOnly) {
  std::vector<int> cpus = base::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to bind 2 ranks; this process may use " << cpus.size();
  if (std::getenv("TETHER_YIELD") != nullptr) GTEST_SKIP() << "TETHER_YIELD is set in this test's environment";
  ScratchDir scratch;
  auto whole = run({"/bin/sh", "-c", "grep '^Cpus_allowed_list:' /proc/self/status"}, {}, kWatchdog);
  for (std::vector<std::string> options : {std::vector<std::string>{"-n", "2"}, {"-n", "2", "--bind-to", "auto"}}) {
    std::string output = placement_report(scratch, options);
    for (std::size_t rank = 0; rank < 2; ++rank) {
      EXPECT_NE(output.find(fmt::format("[rank {}] Cpus_allowed_list:\t{}\n", rank, cpus[rank])), std::string::npos)
          << output;
      EXPECT_NE(output.find(fmt::format("[rank {}] yield=off", rank)), std::string::npos) << output;
    }
  }
  for (std::vector<std::string> options :
       {std::vector<std::string>{"-n", "1"}, {"-n", "3"}, {"-n", "2", "--bind-to", "none"}}) {
    std::string output = placement_report(scratch, options);
    for (int rank = 0; rank < std::stoi(options[1]); ++rank) {
      EXPECT_NE(output.find(fmt::format("[rank {}] {}", rank, whole.output)), std::string::npos) << output;
      EXPECT_NE(output.find(fmt::format("[rank {}] yield=unset", rank)), std::string::npos) << output;
    }
  }
}

TEST(Bootstrap, BadRequestsGetClearErrorsAndTheJobStillCompletes) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "2", "--timeout", "45s", launch_check(), "--bad-requests"},
                     {scratch.env(), "TETHER_BOOTSTRAP_TIMEOUT=3s"}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(count_occurrences(outcome.output, "get from an unknown rank rejected: invalid argument: rank 2 does not exist"), 2)
      << outcome.output;
  EXPECT_EQ(count_occurrences(outcome.output, "get with a 600-character key rejected"), 2) << outcome.output;
  EXPECT_EQ(count_occurrences(outcome.output, "get of a key nobody put rejected"), 2) << outcome.output;
  EXPECT_EQ(count_verified_ranks(outcome.output, 2), 2) << outcome.output;
}

TEST(Bootstrap, WithoutALauncherSaysHowToLaunch) {
  auto outcome = run({launch_check()}, {}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("no PMIx server"), std::string::npos) << outcome.output;
  for (const char* launcher : {"tether-run -n N", "mpirun -n N", "srun --mpi=pmix", "prun -n N"})
    EXPECT_NE(outcome.output.find(launcher), std::string::npos) << "missing " << launcher << " in " << outcome.output;
  EXPECT_EQ(outcome.output.find("of 1 ok"), std::string::npos) << "came up as a singleton: " << outcome.output;
}

TEST(Bootstrap, RankListsParseRangesAndRejectGarbage) {
  EXPECT_EQ(pmix::parse_rank_list("0,2-4,7"), (std::vector<int>{0, 2, 3, 4, 7}));
  EXPECT_EQ(pmix::parse_rank_list("5"), (std::vector<int>{5}));
  EXPECT_FALSE(pmix::parse_rank_list("1,x").has_value());
  EXPECT_FALSE(pmix::parse_rank_list("0-2147483647").has_value());  // ++rank overflowed
  EXPECT_FALSE(pmix::parse_rank_list("0-1048575,7").has_value());
  EXPECT_EQ(pmix::parse_rank_list("2147483646-2147483647"), (std::vector<int>{2147483646, 2147483647}));
  EXPECT_FALSE(pmix::parse_rank_list("4-2").has_value());
}

class MpirunRanks : public ::testing::TestWithParam<int> {};

TEST_P(MpirunRanks, SameBinaryRunsUnchangedUnderMpirun) {
  if (mpirun().empty()) GTEST_SKIP() << "mpirun not found at configure time (Debian package openmpi-bin)";
  const int ranks = GetParam();
  auto outcome = run({mpirun(), "--oversubscribe", "-n", std::to_string(ranks), launch_check(), "--expect-size",
                      std::to_string(ranks)},
                     {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"},
                     kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(count_verified_ranks(outcome.output, ranks), ranks) << outcome.output;
}

INSTANTIATE_TEST_SUITE_P(Launch, MpirunRanks, ::testing::Values(2, 4));

}  // namespace
}  // namespace tether::testing
