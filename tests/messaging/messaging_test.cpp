// Runs tether-messaging-check scenarios as real multi-process jobs under tether-run and
// mpirun, over libfabric shm and tcp, with both rendezvous variants.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/ompi_session.hpp"

extern char** environ;

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;
};

// Starts `argv` in a process group of its own with extra environment, stdout and stderr
// into `log_path`; -1 when it could not start.
pid_t spawn_logged(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment,
                   const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> environment = extra_environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  std::vector<char*> args, envs;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  for (const auto& env : environment) envs.push_back(const_cast<char*>(env.c_str()));
  args.push_back(nullptr);
  envs.push_back(nullptr);
  pid_t child = 0;
  bool started = posix_spawn(&child, args[0], &actions, &attributes, args.data(), envs.data()) == 0;
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  return started ? child : -1;
}

std::string file_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Runs `argv` with extra environment, output captured, killed after `timeout`.
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment,
            std::chrono::seconds timeout) {
  std::string log_path = "/tmp/tether-messaging-test-" + std::to_string(::getpid()) + ".log";
  Outcome outcome;
  pid_t child = spawn_logged(argv, extra_environment, log_path);
  if (child < 0) return outcome;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-child, SIGKILL);  // the watchdog: the whole process group
      ::waitpid(child, &status, 0);
      outcome.output = "watchdog: killed after timeout\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.output += file_text(log_path);
  ::unlink(log_path.c_str());
  return outcome;
}

struct Case {
  std::string scenario;
  int ranks;
  std::string transport;  // "shm" or "tcp"
  std::string protocol;   // "put", "get", "split" or "auto"
};

void PrintTo(const Case& test_case, std::ostream* out) {
  *out << test_case.scenario << " on " << test_case.ranks << " ranks over " << test_case.transport << " ("
       << test_case.protocol << ")";
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.scenario + "_" + std::to_string(info.param.ranks) + "ranks_" +
                     info.param.transport + "_" + info.param.protocol;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

// "shm": tether's own shared-memory transport; "ofishm": libfabric's shm; "tcp": tether's
// own TCP transport; "ofitcp": libfabric's tcp;ofi_rxm; "tcpsend": ofitcp with write
// notifications sent as messages (TETHER_OFI_NOTIFY=send); "hybrid": ranks named as two
// per node (as-nodes.sh), shm-own within a node, tcp-own between; "shmstream": shm-own
// with every RMA write streamed (TETHER_SHM_STREAMING_COPY=0).
// Every rank of `ranks` printed "rank R: SCENARIO passed".
void expect_ranks_passed(const Outcome& outcome, int ranks, const std::string& scenario) {
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_NE(outcome.output.find("rank " + std::to_string(rank) + ": " + scenario + " passed"), std::string::npos)
        << outcome.output;
}

std::vector<std::string> environment_for(const Case& test_case) {
  bool libfabric_tcp = test_case.transport == "ofitcp" || test_case.transport == "tcpsend";
  bool network = test_case.transport == "tcp" || libfabric_tcp;
  std::vector<std::string> environment{"TETHER_SHM_STREAMING_COPY=" + std::string(test_case.transport == "shmstream" ? "0" : "off")};
  std::vector<std::string> paths{"TETHER_SHM=" + std::string(network ? "off" : "on"),
          "TETHER_NET_TRANSPORT=" + std::string(libfabric_tcp ? "ofi" : "own"), "TETHER_TCP_INTERFACE=lo",
          "TETHER_SHM_TRANSPORT=" + std::string(test_case.transport == "ofishm" ? "ofi" : "own"),
          "TETHER_RNDV_PROTOCOL=" + test_case.protocol,
          // tcp on loopback, not on a bridge that a concurrent netns test may remove
          "TETHER_OFI_DOMAIN=" + std::string(test_case.transport == "ofishm" ? "auto" : "lo"),
          "TETHER_OFI_NOTIFY=" + std::string(test_case.transport == "tcpsend" ? "send" : "auto")};
  environment.insert(environment.end(), paths.begin(), paths.end());
  return environment;
}

// Two ranks of tether-messaging-check running `test_case`'s scenario under tether-run, with
// `settings` beside the case's environment.
Outcome run_pair(const Case& test_case, const std::vector<std::string>& settings) {
  std::vector<std::string> environment = environment_for(test_case);
  environment.insert(environment.end(), settings.begin(), settings.end());
  return run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", MESSAGING_CHECK_PATH, test_case.scenario}, environment,
             std::chrono::seconds(90));
}

std::string fmt_route(int rank, int peer, const std::string& transport) {
  return "rank " + std::to_string(rank) + " reaches rank " + std::to_string(peer) + " over " + transport;
}

class TetherRunMessaging : public ::testing::TestWithParam<Case> {};

TEST_P(TetherRunMessaging, ScenarioPasses) {
  const Case& test_case = GetParam();
  std::vector<std::string> argv{TETHER_RUN_PATH, "-n", std::to_string(test_case.ranks), "--timeout", "100s"};
  if (test_case.transport == "hybrid") argv.insert(argv.end(), {AS_NODES_PATH, "2"});
  argv.insert(argv.end(), {MESSAGING_CHECK_PATH, test_case.scenario});
  Outcome outcome = run(argv, environment_for(test_case), std::chrono::seconds(120));
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank = 0; rank < test_case.ranks; ++rank)
    EXPECT_NE(outcome.output.find("rank " + std::to_string(rank) + ": " + test_case.scenario + " passed"),
              std::string::npos)
        << outcome.output;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (std::string transport : {"shm", "ofishm", "tcp", "ofitcp"})
    for (std::string protocol : {"put", "get", "split"}) {
      cases.push_back({"sizes", 2, transport, protocol});
      cases.push_back({"sizes-pool", 3, transport, protocol});
      cases.push_back({"truncation", 2, transport, protocol});
    }
  cases.push_back({"sizes-pool", 3, "shmstream", "put"});  // pool buffers: the copy that streams
  for (std::string transport : {"shm", "tcp"}) {  // the default protocol: split on shm-own, put on tcp
    cases.push_back({"ordering", 2, transport, "auto"});
    cases.push_back({"wildcards", 4, transport, "auto"});
    cases.push_back({"many", 3, transport, "auto"});
    cases.push_back({"bad-input", 2, transport, "auto"});
    cases.push_back({"read-in-place", 2, transport, "auto"});
    cases.push_back({"waited-in-place", 2, transport, "auto"});
  }
  for (std::string protocol : {"put", "get", "split"}) {
    cases.push_back({"sizes", 4, "hybrid", protocol});
    cases.push_back({"sizes", 2, "tcpsend", protocol});
  }
  cases.push_back({"sizes-pool", 3, "hybrid", "auto"});  // split on-node, put between the nodes
  cases.push_back({"many", 6, "tcp", "put"});  // 5 connections a rank: tcp-own polls them through epoll
  cases.push_back({"wildcards", 4, "hybrid", "put"});
  cases.push_back({"read-in-place", 2, "hybrid", "put"});  // hybrid hands its shm-own a reader too
  cases.push_back({"waited-in-place", 2, "hybrid", "put"});  // and routes offers to it
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Jobs, TetherRunMessaging, ::testing::ValuesIn(all_cases()), case_name);

// Two "nodes" of two ranks: every rank names the route to each peer once, shm-own on
// its own node and the network to the other.
TEST(MessagingHybridTest, PeersOnTheSameNodeUseSharedMemoryAndTheOthersTheNetwork) {
  Outcome outcome = run({TETHER_RUN_PATH, "-n", "4", "--timeout", "60s", AS_NODES_PATH, "2", MESSAGING_CHECK_PATH, "sizes"},
                        {"TETHER_LOG_LEVEL=info", "TETHER_TCP_INTERFACE=lo"}, std::chrono::seconds(90));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank = 0; rank < 4; ++rank) {
    int partner = rank ^ 1;
    EXPECT_NE(outcome.output.find(fmt_route(rank, partner, "shm-own")), std::string::npos) << outcome.output;
    for (int other : {(rank + 2) % 4, (rank + 2) % 4 ^ 1})
      EXPECT_NE(outcome.output.find(fmt_route(rank, other, "tcp-own:lo")), std::string::npos) << outcome.output;
  }
}

// TETHER_SHM=off: two ranks on one node reach each other over the network transport, and
// the sizes still arrive intact (how shared memory is compared with the network path).
TEST(MessagingHybridTest, ShmOffSendsToRanksOnTheSameNodeOverTheNetwork) {
  Outcome outcome = run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", MESSAGING_CHECK_PATH, "sizes"},
                        {"TETHER_LOG_LEVEL=info", "TETHER_SHM=off", "TETHER_TCP_INTERFACE=lo"}, std::chrono::seconds(90));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(outcome.output.find(fmt_route(rank, rank ^ 1, "tcp-own:lo")), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("rank " + std::to_string(rank) + ": sizes passed"), std::string::npos);
  }
  EXPECT_EQ(outcome.output.find("shm-own"), std::string::npos) << outcome.output;
}

// Small sends finished at start hold no request slot: 40 in flight under
// TETHER_MAX_REQUESTS=8 (tether-messaging-check sends-at-start), on both on-node and tcp.
TEST(MessagingLimitsTest, SmallSendsFinishedAtStartHoldNoRequest) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome = run_pair({"sends-at-start", 2, transport, "put"}, {"TETHER_MAX_REQUESTS=8"});
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 2, "sends-at-start");
  }
}

// libfabric (whose Debian build costs every process loading it 0.1-0.2 s) stays out of ranks
// that use no libfabric: on-node (shm-own) and on tcp-own chosen outright; the network
// path's auto choice loads it to look for an RDMA provider only where /sys lists an RDMA
// device (transport/ofi/open.cpp), as tether-info reports.
TEST(MessagingStartTest, RanksLoadLibfabricOnlyWhenTheirTransportChoiceNeedsIt) {
  Outcome info = run({TETHER_INFO_PATH}, {"TETHER_SHM=off"}, std::chrono::seconds(60));
  ASSERT_NE(info.output.find("ofi provider: "), std::string::npos) << info.output;
  bool looks = info.output.find("no RDMA device") == std::string::npos;
  struct Expectation {
    std::vector<std::string> environment;
    const char* state;
  };
  std::vector<Expectation> expectations{
      {{}, "not mapped"},
      {{"TETHER_SHM=off", "TETHER_NET_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo"}, "not mapped"},
      {{"TETHER_SHM=off", "TETHER_TCP_INTERFACE=lo"}, looks ? "mapped" : "not mapped"},
      {{"TETHER_SHM_TRANSPORT=ofi"}, "mapped"}};
  for (const auto& expectation : expectations) {
    Outcome outcome = run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", MESSAGING_CHECK_PATH, "libfabric-mapped"},
                          expectation.environment, std::chrono::seconds(90));
    std::string context = "environment:";
    for (const auto& variable : expectation.environment) context += " " + variable;
    context += std::string("\n(tether-info: the auto choice ") + (looks ? "looks" : "does not look") +
               " for an RDMA provider)\n" + outcome.output;
    EXPECT_EQ(outcome.exit_code, 0) << context;
    for (std::string rank : {"0", "1"})
      EXPECT_NE(outcome.output.find("rank " + rank + ": libfabric " + expectation.state + "\n"), std::string::npos)
          << context;
  }
}

// A flood past TETHER_EAGER_CREDITS and an exhausted pool: the sender says its credits
// ran out and sends the rest by rendezvous, a clear out-of-memory error on the one send
// that needed pool memory, every other message delivered intact (tether-messaging-check
// pressure).
TEST(MessagingPressureTest, FloodAndExhaustedPoolGiveClearErrorsAndEveryMessageArrives) {
  for (std::string transport : {"shm", "tcp"}) {
    std::vector<std::string> environment = environment_for({"pressure", 3, transport, "put"});
    for (const char* limit : {"TETHER_POOL_SIZE=32M", "TETHER_POOL_MAX=32M", "TETHER_EAGER_CREDITS=16",
                              "TETHER_LOG_LEVEL=info"})
      environment.emplace_back(limit);
    Outcome outcome = run({TETHER_RUN_PATH, "-n", "3", "--timeout", "60s", MESSAGING_CHECK_PATH, "pressure"},
                          environment, std::chrono::seconds(90));
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 3, "pressure");
    EXPECT_NE(outcome.output.find("rank 2 has used its 16 eager credits at rank 0 (TETHER_EAGER_CREDITS)"),
              std::string::npos)
        << outcome.output;
    EXPECT_NE(outcome.output.find("TETHER_POOL_MAX"), std::string::npos) << "no error naming the pool limit\n"
                                                                         << outcome.output;
  }
}

// A receiver whose pool is exhausted still answers rendezvous (CTS, FIN from the engine's
// control reserve): each protocol's 1 MiB messages land checksummed and both sides finish.
TEST(MessagingPressureTest, RendezvousToARankWithAnExhaustedPoolFinishes) {
  for (std::string transport : {"shm", "tcp"}) {
    for (std::string protocol : {"put", "get", "split"}) {
      Outcome outcome = run_pair({"exhausted-pool-rendezvous", 2, transport, protocol},
                                 {"TETHER_POOL_SIZE=32M", "TETHER_POOL_MAX=32M"});
      EXPECT_EQ(outcome.exit_code, 0) << transport << " " << protocol << "\n" << outcome.output;
      expect_ranks_passed(outcome, 2, "exhausted-pool-rendezvous");
    }
  }
}

// Requests still in flight when the runtime ends are reported and give their keys back
// before the transport closes. A late give-back is a use after free that only ASan sees:
// this test can fail in the sanitizer stage of CI only.
TEST(MessagingFailureTest, RequestsAbandonedAtShutdownAreReportedAndReleased) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome = run_pair({"abandoned-at-shutdown", 2, transport, "put"}, {});
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 2, "abandoned-at-shutdown");
    EXPECT_NE(outcome.output.find("rank 0 shuts down with 2 requests still in flight"), std::string::npos)
        << transport << "\n" << outcome.output;
  }
}

// A rank that dies while another ends its runtime with messages for it queued: the drain
// learns of the death and drops them (libfabric's shm never fails the sends itself; the
// drain waited its whole 2 s there and warned they were not delivered).
TEST(MessagingFailureTest, ShutdownDrainDropsMessagesForARankThatDies) {
  for (std::string transport : {"ofishm", "shm", "tcp"}) {
    Outcome outcome = run_pair({"finalize-dead-peer", 2, transport, "auto"}, {"TETHER_EAGER_CREDITS=8192"});
    EXPECT_NE(outcome.exit_code, 0) << transport << "\n" << outcome.output;  // rank 1 died
    EXPECT_NE(outcome.output.find("rank 0: finalize-dead-peer passed"), std::string::npos) << transport << "\n"
                                                                                          << outcome.output;
    EXPECT_EQ(outcome.output.find("not yet delivered"), std::string::npos) << transport << "\n" << outcome.output;
  }
}

// Four application threads per rank send and receive at once on their own tags, with and
// without a progress thread: every message arrives checksummed (tether-messaging-check
// threads). Runs under TSan too.
TEST(MessagingThreadsTest, FourThreadsPerRankExchangeAtOnce) {
  for (std::string progress_thread : {"off", "on"}) {
    std::vector<std::string> environment = environment_for({"threads", 2, "shm", "put"});
    environment.push_back("TETHER_PROGRESS_THREAD=" + progress_thread);
    Outcome outcome = run({TETHER_RUN_PATH, "-n", "2", "--timeout", "120s", MESSAGING_CHECK_PATH, "threads"},
                          environment, std::chrono::seconds(150));
    EXPECT_EQ(outcome.exit_code, 0) << "progress thread " << progress_thread << "\n" << outcome.output;
    expect_ranks_passed(outcome, 2, "threads");
  }
}

// `test_case` under tether-run, rank `rank` started with `exports` ("NAME=value ...") set.
Outcome run_with_rank_exporting(const Case& test_case, int rank, const std::string& exports) {
  std::string script = "if [ \"$PMIX_RANK\" = " + std::to_string(rank) + " ]; then export " + exports +
                       "; fi; exec " + MESSAGING_CHECK_PATH + " " + test_case.scenario;
  return run({TETHER_RUN_PATH, "-n", std::to_string(test_case.ranks), "--timeout", "80s", "/bin/sh", "-c", script},
             environment_for(test_case), std::chrono::seconds(100));
}

// Rank 0 cannot register user memory (TETHER_INJECT_MEMLOCK_FAILURE, as at the locked-memory
// limit): a rendezvous into its malloc'd buffer is refused, both sides fail with
// memlock_limit naming the fix, the buffer is untouched, and rank 0 keeps receiving from
// ranks 1 and 2 into pool memory (tether-messaging-check memlock-refused).
TEST(MessagingPressureTest, MemlockLimitRefusesTheMessageAndTheRankKeepsServing) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome =
        run_with_rank_exporting({"memlock-refused", 3, transport, "put"}, 0, "TETHER_INJECT_MEMLOCK_FAILURE=1");
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 3, "memlock-refused");
    EXPECT_NE(outcome.output.find("rendezvous from rank 1 cannot land: memlock limit"), std::string::npos)
        << outcome.output;
    EXPECT_NE(outcome.output.find("raise ulimit -l"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("rank 0 refused the 1048576-byte message with tag 5: memlock limit"),
              std::string::npos)
        << outcome.output;
  }
}

// Rank 1 starts with smaller receive buffers and fewer eager credits than rank 0: each
// side reads the other's limits when it first reaches it, says so once, and keeps to them,
// so every size from 0 B up arrives intact both ways (without it rank 0's 8 KiB eager
// messages would be truncated in rank 1's buffers).
TEST(MessagingLimitsTest, RanksWithDifferentEagerLimitsAndCreditsKeepToEachOthers) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome =
        run_with_rank_exporting({"sizes", 2, transport, "put"}, 1, "TETHER_EAGER_LIMIT=100 TETHER_EAGER_CREDITS=3");
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 2, "sizes");
    EXPECT_NE(outcome.output.find("rank 1 takes eager messages up to 116 B and lends 3 credits"), std::string::npos)
        << outcome.output;
  }
}

// The side lent more credits than it lends (rank 1: 3 of its own, rank 0's default) takes
// back every credit it spent: 2000 small messages each way, and no credit refused as excess.
TEST(MessagingLimitsTest, ASideLentMoreCreditsThanItLendsTakesThemAllBack) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome = run_with_rank_exporting({"many", 2, transport, "put"}, 1, "TETHER_EAGER_CREDITS=3");
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    expect_ranks_passed(outcome, 2, "many");
    EXPECT_EQ(outcome.output.find("gave back"), std::string::npos) << transport << "\n" << outcome.output;
  }
}

TEST(MessagingFailureTest, DeadPeerFailsRequestsAndTheLauncherNamesIt) {
  Outcome outcome = run({TETHER_RUN_PATH, "-n", "3", "--timeout", "60s", MESSAGING_CHECK_PATH, "peer-death"}, {},
                        std::chrono::seconds(90));
  EXPECT_NE(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 0 saw rank 1 die"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 1"), std::string::npos) << outcome.output;
}

// Messages a rank sent before it died: an eager one is still received; a receive from any
// source matching its rendezvous fails with peer_unreachable instead of waiting for ever.
TEST(MessagingFailureTest, MessagesFromADeadSenderAreTakenOrFail) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome = run_pair({"dead-sender", 2, transport, "auto"}, {});
    EXPECT_NE(outcome.exit_code, 0) << transport << "\n" << outcome.output;  // rank 1 died
    EXPECT_NE(outcome.output.find("rank 0: dead-sender passed"), std::string::npos) << transport << "\n"
                                                                                    << outcome.output;
  }
}

// A receive from any source that matched a rendezvous waits on that sender: when it goes
// silent (computes without calling the runtime), the receive fails after TETHER_PEER_TIMEOUT.
TEST(MessagingFailureTest, AnySourceRendezvousFailsWhenItsSenderGoesSilent) {
  for (std::string transport : {"shm", "tcp"}) {
    Outcome outcome = run_pair({"silent-sender", 2, transport, "auto"}, {"TETHER_PEER_TIMEOUT=1s"});
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1 gave up on silent rank 0"), std::string::npos) << outcome.output;
  }
}

// A rendezvous whose sender's third write fails (TETHER_INJECT_WRITE_FAILURE: its post, or
// its completion while later writes go out) fails on both sides: the receive learns from
// the sender which writes landed instead of waiting for the rest while its sender stays
// alive. Before, it waited until the job was killed.
TEST(MessagingFailureTest, FailedRendezvousWriteFailsSendAndReceive) {
  struct WriteFailureCase {
    const char* transport;
    const char* protocol;
    const char* failing_at;
  };
  const WriteFailureCase cases[] = {{"shm", "put", "post"},        {"shm", "split", "post"},
                                    {"tcp", "put", "post"},        {"ofitcp", "split", "post"},
                                    {"shm", "put", "completion"},  {"tcp", "put", "completion"},
                                    {"ofitcp", "split", "completion"}};
  for (auto [transport, protocol, failing_at] : cases) {
    Outcome outcome = run_pair({"write-failure", 2, transport, protocol},
                               {"TETHER_INJECT_WRITE_FAILURE=3", "TETHER_RNDV_CHUNK=64K",
                                std::string("TETHER_INJECT_WRITE_FAILURE_AT=") + failing_at});
    EXPECT_EQ(outcome.exit_code, 0) << transport << " " << protocol << " " << failing_at << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1: write-failure passed"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("injected by TETHER_INJECT_WRITE_FAILURE"), std::string::npos) << outcome.output;
  }
}

// Ranks started with different TETHER_RNDV_CHUNK (one mpirun context each): the sender
// cannot follow the receiver's CTS and aborts, so both requests fail with invalid_argument
// and the log names the setting. Before, the receive waited for ever.
TEST(MessagingMpirunTest, MismatchedChunkSettingsFailBothSidesNamingTheSetting) {
  if (::access(MPIRUN_PATH, X_OK) != 0) GTEST_SKIP() << "mpirun not found at " << MPIRUN_PATH;
  tether::testing::PrivateOmpiSession session;
  for (std::string protocol : {"put", "split"}) {
    Outcome outcome = run({MPIRUN_PATH, "--oversubscribe", "-n", "1", "-x", "TETHER_RNDV_CHUNK=64K", MESSAGING_CHECK_PATH,
                           "chunk-mismatch", ":", "-n", "1", "-x", "TETHER_RNDV_CHUNK=128K", MESSAGING_CHECK_PATH,
                           "chunk-mismatch"},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_btl=self,tcp",
                           "OMPI_MCA_pml=ob1", "TETHER_RNDV_PROTOCOL=" + protocol, session.setting()},
                          std::chrono::seconds(120));
    EXPECT_EQ(outcome.exit_code, 0) << protocol << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1: chunk-mismatch passed"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("set the same TETHER_RNDV_CHUNK on every rank"), std::string::npos)
        << outcome.output;
  }
}

// Whether process `pid` is gone (or a zombie) within `limit`.
bool exits_within(pid_t pid, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string stat = file_text("/proc/" + std::to_string(pid) + "/stat");
    auto state = stat.rfind(") ");
    if (stat.empty() || (state != std::string::npos && stat.compare(state + 2, 1, "Z") == 0)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// tether-run SIGKILLed while its two ranks wait on each other (rank 1 on any rank): the PMIx
// server is gone, so each rank's wait fails naming it and the rank exits. Before, both
// waited for ever (a receive from any rank did until every other rank counted as dead failed it).
TEST(MessagingFailureTest, KilledLauncherEndsTheRanksWaits) {
  char directory[] = "/tmp/tether-launcher-lost.XXXXXX";
  ASSERT_NE(::mkdtemp(directory), nullptr);
  const std::string out = directory;
  pid_t launcher = spawn_logged(
      {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", MESSAGING_CHECK_PATH, "launcher-lost", out}, {},
      out + "/launcher.log");
  ASSERT_GT(launcher, 0);
  std::vector<pid_t> ranks;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       ranks.size() < 2 && std::chrono::steady_clock::now() < deadline;) {
    ranks.clear();
    for (int rank : {0, 1})
      if (std::string pid = file_text(out + "/rank" + std::to_string(rank) + ".pid"); !pid.empty())
        ranks.push_back(static_cast<pid_t>(std::stol(pid)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(ranks.size(), 2u) << file_text(out + "/launcher.log");
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  for (pid_t rank : ranks) EXPECT_TRUE(exits_within(rank, std::chrono::seconds(20))) << "rank pid " << rank;
  for (int rank : {0, 1}) {
    std::string result = file_text(out + "/rank" + std::to_string(rank) + ".result");
    EXPECT_NE(result.find("error peer unreachable"), std::string::npos) << rank << ": " << result;
    EXPECT_NE(result.find("lost the PMIx server"), std::string::npos) << rank << ": " << result;
    EXPECT_NE(result.find("start the job again"), std::string::npos) << rank << ": " << result;
  }
  EXPECT_NE(file_text(out + "/rank1.result").find("receive from any rank failed: every other rank is gone"),
            std::string::npos);
  for (pid_t rank : ranks) ::kill(rank, SIGKILL);  // a rank that outlived the check
  std::filesystem::remove_all(out);
}

TEST(MessagingMpirunTest, SizesAndOrderingUnderOpenMpi) {
  if (::access(MPIRUN_PATH, X_OK) != 0) GTEST_SKIP() << "mpirun not found at " << MPIRUN_PATH;
  tether::testing::PrivateOmpiSession session;
  for (std::string scenario : {"sizes", "ordering"}) {
    Outcome outcome = run({MPIRUN_PATH, "-n", "2", "--oversubscribe", MESSAGING_CHECK_PATH, scenario},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_btl=self,tcp",
                           "OMPI_MCA_pml=ob1", session.setting()},
                          std::chrono::seconds(120));
    EXPECT_EQ(outcome.exit_code, 0) << scenario << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1: " + scenario + " passed"), std::string::npos) << outcome.output;
  }
}

}  // namespace
