// Crashes and interruptions of jobs leave nothing in /dev/shm. Serial (RUN_SERIAL):
// libfabric's shm provider, used by other suites, adds and removes names there while it runs.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/launch/subprocess.hpp"

namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kOwnShm{"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own"};

// Names in /dev/shm now (tether's own transport names nothing; libfabric's shm provider
// names a region per endpoint).
std::set<std::string> dev_shm_names() {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) names.insert(entry.path().filename());
  return names;
}

TEST(PersistCleanupTest, KilledRankFailsTheChannelAndLeavesNothingBehind) {
  auto before = dev_shm_names();
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "killed"},
                                      kOwnShm, 90s);
  EXPECT_NE(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 0 saw its channel fail"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("signal 9"), std::string::npos) << outcome.output;
  EXPECT_EQ(dev_shm_names(), before) << "names left in /dev/shm";
}

// On libfabric's shm provider each rank's endpoint has a region in /dev/shm that only
// closing the endpoint removes: tether-run removes the regions of ranks that were killed
// or ended with _exit (both do here) when it reaps them.
TEST(PersistCleanupTest, KilledRankOnLibfabricShmLeavesNoRegion) {
  auto before = dev_shm_names();
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "killed"},
                                      {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=ofi"}, 90s);
  EXPECT_NE(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 0 saw its channel fail"), std::string::npos) << outcome.output;
  EXPECT_EQ(dev_shm_names(), before) << "names left in /dev/shm";
}

// A job that ends normally, with channels and messages between 3 ranks, leaves nothing
// either (and tether-run's private directory is gone: TetherRunFailure checks that).
TEST(PersistCleanupTest, NormalExitLeavesNothingBehind) {
  auto before = dev_shm_names();
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "3", "--timeout", "60s", PERSIST_CHECK_PATH, "fan-in"},
                                      kOwnShm, 90s);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(dev_shm_names(), before) << "names left in /dev/shm";
}

TEST(PersistCleanupTest, InterruptedLauncherLeavesNothingBehind) {
  auto before = dev_shm_names();
  tether::testing::Subprocess job({TETHER_RUN_PATH, "-n", "3", PERSIST_CHECK_PATH, "fan-in", "100000000"},
                                  kOwnShm);
  std::this_thread::sleep_for(2s);
  ASSERT_EQ(::kill(job.pid(), SIGINT), 0);
  auto outcome = job.wait(30s);
  EXPECT_FALSE(outcome.timed_out) << outcome.output;
  EXPECT_NE(outcome.exit_code, 0) << outcome.output;
  EXPECT_EQ(dev_shm_names(), before) << "names left in /dev/shm";
}

}  // namespace
