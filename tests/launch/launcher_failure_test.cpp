// Jobs that fail: a rank killed by SIGKILL, a hung job past --timeout, an abort, Ctrl-C,
// a missing program, bad usage. Each checks the exit code, the message naming the rank,
// what the survivors saw, and that tether-run's private directory is gone afterwards.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "tests/launch/launch_support.hpp"

namespace tether::testing {
namespace {

TEST(TetherRunFailure, KilledRankIsNamedAndSurvivorsFailFast) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "4", "--timeout", "45s", launch_check(), "--die-rank", "1"},
                     {scratch.env(), "TETHER_BOOTSTRAP_TIMEOUT=30s"}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 128 + SIGKILL) << outcome.output;
  EXPECT_TRUE(std::regex_search(outcome.output,
                                std::regex(R"(job failed: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\))")))
      << outcome.output;
  for (int survivor : {0, 2, 3}) {
    // The survivor's get from rank 1 failed naming rank 1, well before the 30 s bootstrap timeout.
    std::smatch found;
    std::regex detected(fmt::format(R"(launch-check rank {}: detected death of rank 1 in (\d+) ms)", survivor));
    ASSERT_TRUE(std::regex_search(outcome.output, found, detected)) << outcome.output;
    EXPECT_LT(std::stol(found[1]), 10000) << outcome.output;
  }
  EXPECT_LT(outcome.elapsed, 20s);
  EXPECT_TRUE(scratch.entries().empty());
}

// A survivor that learns of the death but keeps running is stopped after --kill-after;
// the job still reports the first failure, not the SIGTERM that ended the survivor.
TEST(TetherRunFailure, SurvivorsStillRunningAfterKillAfterAreStopped) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "2", "--kill-after", "1s", "--timeout", "45s", launch_check(), "--die-rank",
                      "1", "--hang-rank", "0"},
                     {scratch.env()}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 128 + SIGKILL) << outcome.output;
  EXPECT_NE(outcome.output.find("launch-check rank 0: detected death of rank 1"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("still run after a failure: sending SIGTERM to ranks 0"), std::string::npos)
      << outcome.output;
  EXPECT_NE(outcome.output.find("job failed: rank 1 "), std::string::npos) << outcome.output;
  EXPECT_GE(outcome.elapsed, 1s);
  EXPECT_LT(outcome.elapsed, 15s);
  EXPECT_TRUE(scratch.entries().empty());
}

TEST(TetherRunFailure, TimeoutStopsAHungJob) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "2", "--timeout", "2s", launch_check(), "--hang-rank", "1"}, {scratch.env()},
                     kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 124) << outcome.output;
  EXPECT_NE(outcome.output.find("timed out after 2 s with ranks 1 still running"), std::string::npos) << outcome.output;
  EXPECT_GE(outcome.elapsed, 2s);
  EXPECT_LT(outcome.elapsed, 15s);
  EXPECT_TRUE(scratch.entries().empty());
}

TEST(TetherRunFailure, AbortEndsTheJobWithItsExitCode) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "3", "--timeout", "45s", launch_check(), "--abort-rank", "2"},
                     {scratch.env()}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 7) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 2 called abort with exit code 7"), std::string::npos) << outcome.output;
  EXPECT_TRUE(scratch.entries().empty());
}

// While the job runs its directory exists with mode 0700; Ctrl-C is forwarded, and the
// directory is gone once tether-run exits.
TEST(TetherRunFailure, InterruptIsForwardedAndThePrivateDirectoryRemoved) {
  ScratchDir scratch;
  Subprocess launcher({tether_run(), "-n", "2", "--timeout", "40s", launch_check(), "--hang-rank", "0"},
                      {scratch.env()});
  std::vector<std::string> entries;
  for (int tries = 0; tries < 200 && entries.empty(); ++tries) {
    std::this_thread::sleep_for(25ms);
    entries = scratch.entries();
  }
  ASSERT_EQ(entries.size(), 1u);
  struct stat info {};
  ASSERT_EQ(stat(entries.front().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  std::this_thread::sleep_for(500ms);  // let the ranks connect before the interrupt
  kill(launcher.pid(), SIGINT);
  auto outcome = launcher.wait(kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 128 + SIGINT) << outcome.output;
  EXPECT_NE(outcome.output.find("got SIGINT: forwarding it to ranks"), std::string::npos) << outcome.output;
  EXPECT_LT(outcome.elapsed, 20s);
  EXPECT_TRUE(scratch.entries().empty()) << scratch.entries().front();
}

// A directory left by a launcher that was SIGKILLed is removed by the next launcher.
TEST(TetherRunFailure, StaleDirectoryOfADeadLauncherIsRemoved) {
  ScratchDir scratch;
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const std::string stale = fmt::format("{}/tether-run.{}.AbCdEf", scratch.path(), dead);
  ASSERT_EQ(mkdir(stale.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((stale + "/leftover").c_str(), 0700), 0);
  auto outcome = run({tether_run(), "-n", "1", "--timeout", "45s", launch_check()}, {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_TRUE(scratch.entries().empty()) << scratch.entries().front();
}

TEST(TetherRunFailure, MissingProgramIsReported) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "2", "/nonexistent/program"}, {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 127) << outcome.output;
  EXPECT_NE(outcome.output.find("cannot run '/nonexistent/program': No such file or directory"), std::string::npos)
      << outcome.output;
  EXPECT_TRUE(scratch.entries().empty());
}

TEST(TetherRunFailure, BadUsageNamesTheProblem) {
  auto no_count = run({tether_run(), launch_check()}, {}, kWatchdog);
  EXPECT_EQ(no_count.exit_code, 2);
  EXPECT_NE(no_count.output.find("missing -n N"), std::string::npos) << no_count.output;
  auto bad_timeout = run({tether_run(), "-n", "2", "--timeout", "soon", launch_check()}, {}, kWatchdog);
  EXPECT_EQ(bad_timeout.exit_code, 2);
  EXPECT_NE(bad_timeout.output.find("--timeout 'soon' is not a duration"), std::string::npos) << bad_timeout.output;
}

}  // namespace
}  // namespace tether::testing
