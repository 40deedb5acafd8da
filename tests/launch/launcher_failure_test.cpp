// Jobs that fail: a rank killed by SIGKILL, a hung job past --timeout, an abort, Ctrl-C,
// a missing program, bad usage. Each checks the exit code, the message naming the rank,
// what the survivors saw, and that tether-run's private directory is gone afterwards.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "tests/launch/launch_support.hpp"

namespace tether::testing {
namespace {

// Each survivor's get from rank 1 failed naming rank 1, well before the 30 s bootstrap timeout.
void expect_survivors_saw_rank_1_die(const Outcome& outcome, std::initializer_list<int> survivors) {
  for (int survivor : survivors) {
    std::smatch found;
    std::regex detected(fmt::format(R"(launch-check rank {}: detected death of rank 1 in (\d+) ms)", survivor));
    ASSERT_TRUE(std::regex_search(outcome.output, found, detected)) << outcome.output;
    EXPECT_LT(std::stol(found[1]), 10000) << outcome.output;
  }
}

TEST(TetherRunFailure, KilledRankIsNamedAndSurvivorsFailFast) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "4", "--timeout", "45s", launch_check(), "--die-rank", "1"},
                     {scratch.env(), "TETHER_BOOTSTRAP_TIMEOUT=30s"}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 128 + SIGKILL) << outcome.output;
  EXPECT_TRUE(std::regex_search(outcome.output,
                                std::regex(R"(job failed: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\))")))
      << outcome.output;
  expect_survivors_saw_rank_1_die(outcome, {0, 2, 3});
  EXPECT_LT(outcome.elapsed, 20s);
  EXPECT_TRUE(scratch.entries().empty());
}

// A rank that exits 0 while connected to the PMIx server (no PMIx_Finalize) fails the job,
// and its peers learn of it at once instead of waiting in the fence for
// TETHER_BOOTSTRAP_TIMEOUT; with the old launcher the job took 30 s.
TEST(TetherRunFailure, RankExitingWithoutFinalizeFailsTheJob) {
  ScratchDir scratch;
  auto outcome = run({tether_run(), "-n", "3", "--timeout", "45s", launch_check(), "--quit-rank", "1"},
                     {scratch.env(), "TETHER_BOOTSTRAP_TIMEOUT=30s"}, kWatchdog);
  ASSERT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  std::regex named(R"(job failed: rank 1 \(pid \d+\) exited with code 0 without finalizing: .*PMIx_Finalize)");
  EXPECT_TRUE(std::regex_search(outcome.output, named)) << outcome.output;
  expect_survivors_saw_rank_1_die(outcome, {0, 2});
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
  EXPECT_NE(outcome.output.find("still run after a failure: sent SIGTERM to ranks 0"), std::string::npos)
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
  // An exit status keeps 8 bits: an abort with code 256 must not end the job with 0.
  outcome = run({tether_run(), "-n", "2", "--timeout", "45s", launch_check(), "--abort-rank", "1", "--abort-code",
                 "256"},
                {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 1 called abort with exit code 256"), std::string::npos) << outcome.output;
}

// Ranks that write their pid to a file, then sleep for `seconds`; wait_for_pids reads them.
std::vector<std::string> sleeping_ranks(const std::string& pid_file, int ranks, const char* seconds = "30") {
  return {tether_run(), "-n", std::to_string(ranks), "--timeout", "40s", "/bin/sh", "-c",
          fmt::format("echo $$ >> {}; exec sleep {}", pid_file, seconds)};
}

std::vector<pid_t> wait_for_pids(const std::string& pid_file, std::size_t count) {
  std::vector<pid_t> pids;
  for (int tries = 0; tries < 400 && pids.size() < count; ++tries) {
    std::this_thread::sleep_for(25ms);
    pids.clear();
    std::ifstream file(pid_file);
    for (pid_t pid = 0; file >> pid;) pids.push_back(pid);
  }
  return pids;
}

// Gone, or a zombie nobody reaped yet (it runs no more either way).
bool has_ended(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return true;
  std::size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
}

bool all_end_within(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  for (auto waited = 0ms; waited < limit; waited += 25ms) {
    if (std::all_of(pids.begin(), pids.end(), has_ended)) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

// A 2-rank job of sleeping ranks that wrote their pids, its launcher started through
// `prefix` (a shell that ignores a signal first, say); `ranks` holds both pids once read.
struct SleepingJob {
  explicit SleepingJob(std::vector<std::string> prefix = {}) {
    for (std::string& word : sleeping_ranks(pid_dir.path() + "/pids", 2)) prefix.push_back(std::move(word));
    launcher.emplace(prefix, std::vector<std::string>{scratch.env()});
    ranks = wait_for_pids(pid_dir.path() + "/pids", 2);
  }
  ScratchDir scratch;
  ScratchDir pid_dir;
  std::optional<Subprocess> launcher;
  std::vector<pid_t> ranks;
};

// tether-run -n 1 `options` --timeout 2s, its rank writing for ever (`yes`) into a pipe whose
// reader sleeps 30 s (`redirect`: what else goes there): the rank must end within 8 s of
// starting. Returns the launcher's outcome once the reader was killed.
Outcome timeout_behind_a_stalled_reader(const std::string& options, const std::string& redirect) {
  ScratchDir scratch;
  ScratchDir pid_dir;
  const std::string pids = pid_dir.path() + "/pids";
  // The reader's pid goes to the file too, so it can be killed.
  const std::string script = "\"$0\" -n 1 " + options + " --timeout 2s /bin/sh -c \"echo \\$\\$ >> $1; exec yes\" " +
                             redirect + "| sh -c 'echo $$ >> $1.reader; exec sleep 30' reader \"$1\"";
  Subprocess shell({"/bin/sh", "-c", script, tether_run(), pids}, {scratch.env()});
  auto ranks = wait_for_pids(pids, 1);
  EXPECT_EQ(ranks.size(), 1u);
  EXPECT_TRUE(!ranks.empty() && all_end_within(ranks, 8000ms)) << "the rank outlived --timeout 2s";
  for (pid_t reader : wait_for_pids(pids + ".reader", 1)) kill(reader, SIGKILL);  // the launcher then ends too
  return shell.wait(kWatchdog);
}

// --timeout with the launcher's stderr a full pipe nobody reads (a stalled CI log): the
// ranks are stopped at once. The message used to go first, and its write blocked the
// SIGTERM until the reader went away.
TEST(TetherRunFailure, TimeoutStopsRanksWhileTheOutputPipeIsFull) {
  (void)timeout_behind_a_stalled_reader("", "2>&1 ");
}

// The same with --tag-output, whose lines tether-run writes itself: they wait in a queue
// while the pipe is full, and the loop goes on. Its blocking write used to hold the loop,
// so --timeout (and Ctrl-C) never came while the reader stalled.
TEST(TetherRunFailure, TimeoutStopsRanksWhileTheTaggedOutputPipeIsFull) {
  auto outcome = timeout_behind_a_stalled_reader("--tag-output", "");
  EXPECT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_NE(outcome.output.find("timed out after 2 s"), std::string::npos) << outcome.output;
}

// --tag-output into a pipe whose reader quit (`| head -n 1`): the job ends as it does
// without --tag-output, its rank killed by SIGPIPE; the launcher used to drop the lines
// while the rank wrote on until --timeout (exit 124).
TEST(TetherRunFailure, TaggedOutputIntoAClosedPipeEndsTheJob) {
  ScratchDir scratch;
  auto outcome = run({"/bin/bash", "-c", "set -o pipefail; \"$0\" -n 1 --tag-output --timeout 30s yes | head -n 1",
                      tether_run()},
                     {scratch.env()}, kWatchdog);
  EXPECT_EQ(outcome.exit_code, 128 + SIGPIPE) << outcome.output;
  EXPECT_NE(outcome.output.find("[rank 0] y"), std::string::npos) << outcome.output;
}

// A launcher killed outright (no chance to stop its ranks) still takes them along.
TEST(TetherRunFailure, RanksOfAKilledLauncherEndToo) {
  SleepingJob job;
  ASSERT_EQ(job.ranks.size(), 2u);
  kill(job.launcher->pid(), SIGKILL);
  auto outcome = job.launcher->wait(kWatchdog);
  EXPECT_EQ(outcome.exit_code, 128 + SIGKILL) << outcome.output;
  EXPECT_TRUE(all_end_within(job.ranks, 5000ms))
      << "ranks " << job.ranks[0] << " and " << job.ranks[1] << " outlived the launcher";
}

// Under nohup or in a script's background job the parent ignores SIGHUP or SIGINT; the
// ranks inherit that, so the launcher ignores it too instead of forwarding it to no effect
// and killing the ranks 5 s later. SIGTERM still stops the job.
TEST(TetherRunFailure, ASignalTheParentIgnoresStaysIgnored) {
  SleepingJob job({"/bin/sh", "-c", "trap '' INT; exec \"$0\" \"$@\""});
  ASSERT_EQ(job.ranks.size(), 2u);
  kill(job.launcher->pid(), SIGINT);
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(has_ended(job.ranks[0]) || has_ended(job.ranks[1])) << "a rank ended after an ignored SIGINT";
  kill(job.launcher->pid(), SIGTERM);
  auto outcome = job.launcher->wait(kWatchdog);
  EXPECT_EQ(outcome.exit_code, 128 + SIGTERM) << outcome.output;
  EXPECT_EQ(outcome.killed_by, SIGTERM) << outcome.output;
  EXPECT_EQ(outcome.output.find("SIGINT"), std::string::npos) << outcome.output;
  EXPECT_EQ(outcome.output.find("SIGKILL"), std::string::npos) << outcome.output;
  EXPECT_LT(outcome.elapsed, 20s);
}

// A rank that died while the launcher was stopped, before a Ctrl-C reached it, is the
// job's failure; the interrupt that came after it is not.
TEST(TetherRunFailure, ARankDeadBeforeAnInterruptIsTheFailure) {
  SleepingJob job;
  ASSERT_EQ(job.ranks.size(), 2u);
  Subprocess& launcher = *job.launcher;
  const std::vector<pid_t>& ranks = job.ranks;
  kill(launcher.pid(), SIGSTOP);
  kill(ranks[1], SIGKILL);
  EXPECT_TRUE(all_end_within({ranks[1]}, 5000ms));
  kill(launcher.pid(), SIGINT);
  kill(launcher.pid(), SIGCONT);
  auto outcome = launcher.wait(kWatchdog);
  EXPECT_EQ(outcome.exit_code, 128 + SIGKILL) << outcome.output;
  EXPECT_EQ(outcome.killed_by, 0) << outcome.output;  // the rank's death decides, not the interrupt
  EXPECT_TRUE(std::regex_search(
      outcome.output, std::regex(fmt::format(R"(job failed: rank \d \(pid {}\) was killed by signal 9)", ranks[1]))))
      << outcome.output;
  EXPECT_TRUE(job.scratch.entries().empty());
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
  EXPECT_EQ(outcome.killed_by, SIGINT) << "a shell loop around tether-run would not stop\n" << outcome.output;
  EXPECT_NE(outcome.output.find("got SIGINT: forwarded it to ranks"), std::string::npos) << outcome.output;
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
  auto unknown = run({tether_run(), "-n", "2", "--frobnicate"}, {}, kWatchdog);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown option '--frobnicate'"), std::string::npos) << unknown.output;
  auto flag_with_value = run({tether_run(), "-n", "2", "--tag-output=x", launch_check()}, {}, kWatchdog);
  EXPECT_EQ(flag_with_value.exit_code, 2);
  EXPECT_NE(flag_with_value.output.find("--tag-output takes no value"), std::string::npos) << flag_with_value.output;
  auto glued = run({tether_run(), "-n=2", launch_check()}, {}, kWatchdog);
  EXPECT_EQ(glued.exit_code, 2);
  EXPECT_NE(glued.output.find("give the rank count after a space"), std::string::npos) << glued.output;
  auto separated = run({tether_run(), "-n", "1", "--", "/bin/true"}, {}, kWatchdog);
  EXPECT_EQ(separated.exit_code, 0) << separated.output;
  // Longer would overflow the deadline: a timeout at once, or none at all.
  auto endless = run({tether_run(), "-n", "2", "--timeout", "153722867m", launch_check()}, {}, kWatchdog);
  EXPECT_EQ(endless.exit_code, 2);
  EXPECT_NE(endless.output.find("--timeout '153722867m' is longer than a year"), std::string::npos) << endless.output;
}

}  // namespace
}  // namespace tether::testing
