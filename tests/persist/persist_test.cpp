// Runs tether-persist-check scenarios as real jobs under tether-run (libfabric shm and
// tcp;ofi_rxm) and under mpirun, each with a watchdog.
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/launch/subprocess.hpp"
#include "tests/support/ompi_session.hpp"

namespace {

using namespace std::chrono_literals;

struct Case {
  std::string scenario;
  int ranks;
  std::string transport;  // "shm" or "tcp"
  std::string count;      // messages ("" = the scenario's default)
};

void PrintTo(const Case& test_case, std::ostream* out) {
  *out << test_case.scenario << " on " << test_case.ranks << " ranks over " << test_case.transport;  // shm: shm-own
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.scenario + "_" + std::to_string(info.param.ranks) + "ranks_" + info.param.transport;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

std::vector<std::string> check_command(const Case& test_case) {
  std::vector<std::string> argv{PERSIST_CHECK_PATH, test_case.scenario};
  if (!test_case.count.empty()) argv.push_back(test_case.count);
  return argv;
}

// "tcp": tether's own TCP transport on lo; "ownrma": the same with every channel message
// an RMA write; "hybrid": two ranks per node named by as-nodes.sh, so a job mixes shm-own
// and tcp-own. The others run libfabric's tcp;ofi_rxm ("ofitcp").
std::vector<std::string> transport_environment(const std::string& transport) {
  if (transport == "shm") return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own"};
  if (transport == "shmstream")  // every direct store beyond the flag line streams
    return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own", "TETHER_SHM_STREAMING_COPY=0"};
  if (transport == "shmsplitoff")  // the sender copies every direct store alone
    return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own", "TETHER_CHANNEL_SPLIT_COPY=0"};
  if (transport == "hybrid") return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo"};
  if (transport == "ofishm") return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=ofi"};
  if (transport == "tcp") return {"TETHER_SHM=off", "TETHER_NET_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo"};
  if (transport == "ownrma")
    return {"TETHER_SHM=off", "TETHER_NET_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo", "TETHER_CHANNEL_INLINE_MAX=0"};
  std::vector<std::string> tcp{"TETHER_SHM=off", "TETHER_OFI_PROVIDER=tcp", "TETHER_OFI_DOMAIN=lo"};
  // "tcpsend": RMA writes whose notifications follow as messages; "tcprma": RMA writes with
  // remote CQ data for every size; "tcpmixed": small messages as sends, larger ones as
  // writes, in one stream (the 256-byte slots of "integrity").
  if (transport == "tcpsend") tcp.insert(tcp.end(), {"TETHER_OFI_NOTIFY=send", "TETHER_CHANNEL_INLINE_MAX=0"});
  if (transport == "tcprma") tcp.push_back("TETHER_CHANNEL_INLINE_MAX=0");
  if (transport == "tcpmixed") tcp.push_back("TETHER_CHANNEL_INLINE_MAX=100");
  return tcp;
}

void expect_every_rank_passed(const tether::testing::Outcome& outcome, const Case& test_case) {
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_FALSE(outcome.timed_out) << outcome.output;
  for (int rank = 0; rank < test_case.ranks; ++rank)
    EXPECT_NE(outcome.output.find("rank " + std::to_string(rank) + ": " + test_case.scenario + " passed"),
              std::string::npos)
        << outcome.output;
}

class PersistUnderTetherRun : public ::testing::TestWithParam<Case> {};

TEST_P(PersistUnderTetherRun, ScenarioPasses) {
  const Case& test_case = GetParam();
  std::vector<std::string> argv{TETHER_RUN_PATH, "-n", std::to_string(test_case.ranks), "--timeout", "150s"};
  if (test_case.transport == "hybrid") argv.insert(argv.end(), {AS_NODES_PATH, "2"});
  for (auto& arg : check_command(test_case)) argv.push_back(arg);
  expect_every_rank_passed(tether::testing::run(argv, transport_environment(test_case.transport), 170s), test_case);
}

// no-overhead's stream: 20,000 messages, a quarter of that under a sanitizer (no NDEBUG).
#ifdef NDEBUG
const std::string kNoOverheadMessages = "20000";
#else
const std::string kNoOverheadMessages = "5000";
#endif

std::vector<Case> tether_run_cases() {
  std::vector<Case> cases;
  for (std::string transport : {"shm", "tcp"}) {
    // Sanitizer builds (no NDEBUG) run a tenth of the shm stream, a fifth of the tcp one.
#ifdef NDEBUG
    std::string many_messages = transport == "shm" ? "1000000" : "50000";
#else
    std::string many_messages = transport == "shm" ? "100000" : "10000";
#endif
    cases.push_back({"integrity", 2, transport, many_messages});
    for (std::string scenario : {"duplex", "large", "slow-receiver", "partitioned", "no-overhead", "user-buffers", "self",
                                 "mismatch", "bad-input", "close-in-flight", "close-unconnected", "user-slots",
                                 "close-user-slots", "reply-credits", "lazy-acknowledgements"})
      cases.push_back({scenario, 2, transport, scenario == "no-overhead" ? kNoOverheadMessages : ""});
    cases.push_back({"many", 3, transport, ""});
    // Six ranks share this machine's two CPUs: a few thousand messages per writer.
    cases.push_back({"fan-in", transport == "shm" ? 6 : 4, transport, transport == "shm" ? "4000" : "2000"});
  }
  for (std::string scenario : {"integrity", "partitioned", "bad-input", "close-in-flight"})  // libfabric's shm
    cases.push_back({scenario, 2, "ofishm", scenario == "integrity" ? "100000" : ""});
  for (std::string scenario : {"integrity", "large", "duplex", "user-slots"})
    cases.push_back({scenario, 2, "shmstream", scenario == "integrity" ? "100000" : ""});
  for (std::string scenario : {"large", "held-large-slots", "split-sizes"})
    cases.push_back({scenario, 2, "shmsplitoff", ""});
  cases.push_back({"split-sizes", 2, "shm", ""});
  cases.push_back({"split-sizes", 2, "shmstream", ""});
  cases.push_back({"many", 3, "hybrid", ""});
  cases.push_back({"send-buffers", 2, "hybrid", ""});  // maps_peer_pool through the hybrid's routes
  cases.push_back({"integrity", 2, "tcpsend", "20000"});
  for (std::string transport : {"tcprma", "ownrma"})
    for (std::string scenario : {"integrity", "no-overhead", "slow-receiver", "duplex"})
      cases.push_back({scenario, 2, transport, scenario == "integrity"     ? "20000"
                                               : scenario == "no-overhead" ? kNoOverheadMessages
                                                                           : ""});
  for (std::string scenario : {"integrity", "duplex", "large", "close-in-flight"})
    cases.push_back({scenario, 2, "ofitcp", scenario == "integrity" ? "20000" : ""});
  cases.push_back({"integrity", 2, "tcpmixed", "20000"});
  cases.push_back({"duplex", 2, "tcpmixed", ""});
  cases.push_back({"partitioned", 2, "tcpsend", ""});
  cases.push_back({"fan-in", 4, "hybrid", "2000"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Jobs, PersistUnderTetherRun, ::testing::ValuesIn(tether_run_cases()), case_name);

// Both ranks of no-overhead report how their kNoOverheadMessages went: "W writes, S sends".
void expect_both_ranks_sent(const tether::testing::Outcome& outcome, const std::string& how) {
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  for (const char* rank : {"rank 0", "rank 1"})
    EXPECT_NE(outcome.output.find(std::string(rank) + ": " + kNoOverheadMessages + " messages (" + how + ")"),
              std::string::npos)
        << outcome.output;
}

// Released slots go back to the sender in batches of TETHER_CHANNEL_CREDIT_BATCH where
// credits are RDMA writes (tcp-own and libfabric's tcp): 8 releases back to back make 8 / B
// credit writes. (A progress thread would send owed credits between them.)
TEST(PersistCreditTest, ReleasedSlotsGoBackInBatches) {
  for (std::string transport : {"ownrma", "tcprma"}) {
    for (std::string batch : {"1", "4"}) {
      auto environment = transport_environment(transport);
      environment.push_back("TETHER_CHANNEL_CREDIT_BATCH=" + batch);
      environment.push_back("TETHER_PROGRESS_THREAD=off");
      auto outcome = tether::testing::run(
          {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "credit-batch"}, environment, 90s);
      SCOPED_TRACE(transport + ", batch " + batch);
      expect_every_rank_passed(outcome, {"credit-batch", 2, transport, ""});
      EXPECT_NE(outcome.output.find("8 releases, " + std::to_string(8 / std::stoi(batch)) + " credit writes"),
                std::string::npos)
          << outcome.output;
    }
  }
}

// A ping-pong lands every message in one slot where the sender picks it (shm-own's direct
// stores; tcp-own's sends and writes, delivered in order) and rotates through all four over
// libfabric's tcp;ofi_rxm; held-slots checks no held slot is written.
TEST(PersistSlotsTest, TheSenderPicksTheSlotReleasedLastWhereDeliveryIsOrdered) {
  for (auto [transport, slots] : {std::pair{"shm", 1}, {"tcp", 1}, {"ownrma", 1}, {"ofitcp", 4}}) {
#ifndef NDEBUG
    if (std::string(transport) == "ofitcp") continue;  // sanitizer builds: the release build runs it (CI time)
#endif
    for (std::string scenario : {"warm-slot", "warm-large-slot", "held-slots"}) {
      std::vector<std::string> argv{TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, scenario};
      if (scenario == "held-slots") argv.push_back("5000");
      auto outcome = tether::testing::run(argv, transport_environment(transport), 90s);
      EXPECT_EQ(outcome.exit_code, 0) << transport << " " << scenario << "\n" << outcome.output;
      if (scenario != "held-slots") {
        int sent = scenario == "warm-slot" ? 500 : 10;  // by each rank: half the ping-pong
        EXPECT_NE(outcome.output.find(fmt::format("{} messages landed in {} slot(s)", sent, slots)), std::string::npos)
            << transport << "\n" << outcome.output;
      }
    }
  }
}

// On shm-own's direct path an answer carries the credit of the message it answers in its
// flag line: all but one on each side (rank 1's first release comes before it ever
// answered; rank 0's last has no message after it), so at most one credit word is stored.
TEST(PersistCreditsTest, AnAnswerCarriesTheCreditOfTheMessageItAnswers) {
  auto outcome = tether::testing::run(
      {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "reply-credits", "5000"},
      transport_environment("shm"), 90s);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  for (int rank : {0, 1}) {
    std::smatch found;
    std::regex line(
        fmt::format("rank {}: 5000 answers checked; (\\d+) credits carried by answers, (\\d+) credit words", rank));
    ASSERT_TRUE(std::regex_search(outcome.output, found, line)) << outcome.output;
    EXPECT_GE(std::stoull(found[1].str()), 4999U) << outcome.output;
    EXPECT_LE(std::stoull(found[2].str()), 1U) << outcome.output;
  }
}

// Large direct stores wait briefly for the slot the last message took; when the receiver
// holds its messages the waits time out and no held slot is written. Elsewhere no wait.
TEST(PersistSlotsTest, LargeDirectStoresWaitForAWarmSlotButNeverWriteAHeldOne) {
  for (auto [transport, waits] : {std::pair{"shm", true}, {"tcp", false}}) {
    auto outcome = tether::testing::run(
        {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "held-large-slots"},
        transport_environment(transport), 90s);
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    std::smatch found;
    ASSERT_TRUE(std::regex_search(outcome.output, found, std::regex("rank 0: (\\d+) waits for a warm slot")))
        << outcome.output;
    EXPECT_EQ(std::stoull(found[1].str()) > 0, waits) << transport << "\n" << outcome.output;
  }
}

// A send channel on the direct path (shm-own) holds one pool buffer, not one per slot.
TEST(PersistSlotsTest, ADirectSendChannelHoldsOneBuffer) {
  for (auto [transport, buffers] : {std::pair{"shm", 1}, {"tcp", 4}, {"ofitcp", 4}}) {
    auto outcome =
        tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "send-buffers"},
                             transport_environment(transport), 90s);
    EXPECT_EQ(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find(fmt::format("slots holds {} buffer(s)", buffers)), std::string::npos)
        << transport << "\n" << outcome.output;
  }
}

// Over tcp, rank 1 takes no channel messages (TETHER_CHANNEL_INLINE_MAX=0) while rank 0
// would send them: rank 1's hello says so, and both directions go as RMA writes.
TEST(PersistLimitsTest, APeerThatTakesNoMessagesGetsWritesOnly) {
  std::string check = std::string(PERSIST_CHECK_PATH) + " no-overhead " + kNoOverheadMessages;
  std::string script = "if [ \"$PMIX_RANK\" = 1 ]; then export TETHER_CHANNEL_INLINE_MAX=0; fi; exec " + check;
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "100s", "/bin/sh", "-c", script},
                                      transport_environment("tcp"), 120s);
  expect_both_ranks_sent(outcome, kNoOverheadMessages + " writes, 0 sends");
}

// Writes and credits landing from the peer are signs of life: a stream that outlasts a
// quarter of TETHER_PEER_TIMEOUT with no engine message sends no liveness probe (one would
// count as a message besides the writes and fail no-overhead's check).
TEST(PersistLimitsTest, ChannelWritesKeepThePeerAliveWithoutProbes) {
  auto environment = transport_environment("tcprma");
  environment.push_back("TETHER_PEER_TIMEOUT=1s");
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "100s", PERSIST_CHECK_PATH, "no-overhead",
                                       kNoOverheadMessages},
                                      environment, 120s);
  expect_both_ranks_sent(outcome, kNoOverheadMessages + " writes, 0 sends");
}

// The default over tcp: every message of no-overhead (at most 1 KiB) is one send.
TEST(PersistLimitsTest, SmallMessagesOverTcpAreSends) {
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "100s", PERSIST_CHECK_PATH, "no-overhead",
                                       kNoOverheadMessages},
                                      transport_environment("tcp"), 120s);
  expect_both_ranks_sent(outcome, "0 writes, " + kNoOverheadMessages + " sends");
}

// A sender waiting in next_buffer() for its write's acknowledgement watches the peer: one
// that falls silent fails the channel with peer_unreachable after TETHER_PEER_TIMEOUT.
TEST(PersistFailureTest, NextBufferRetriesEndWhenThePeerFallsSilent) {
  auto environment = transport_environment("ownrma");
  environment.push_back("TETHER_PEER_TIMEOUT=1s");
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH,
                                       "silent-peer-buffer"},
                                      environment, 90s);
  expect_every_rank_passed(outcome, {"silent-peer-buffer", 2, "ownrma", ""});
}

// Over tcp-own a write finishes when the receiver's poll answers it; wait_buffer() gives
// a free buffer meanwhile (the halo apps' next iteration packs into it while a neighbour
// computes).
TEST(PersistSlotsTest, WaitBufferGivesAFreeBufferWhileTheLastWriteIsUnanswered) {
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH,
                                       "buffer-while-peer-computes"},
                                      transport_environment("ownrma"), 90s);
  expect_every_rank_passed(outcome, {"buffer-while-peer-computes", 2, "ownrma", ""});
}

TEST(PersistFailureTest, DeadPeerFailsTheChannelAndTheLauncherNamesIt) {
  for (std::string transport : {"shm", "tcp", "ofitcp"}) {
    auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "peer-death"},
                                        transport_environment(transport), 90s);
    EXPECT_NE(outcome.exit_code, 0) << transport << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 0 saw its channel fail"), std::string::npos) << transport << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1"), std::string::npos) << outcome.output;
  }
}

// A channel write that fails (injected) at its post or at its completion fails the
// sender's channel and, told by the sender, the receiver's once the messages that landed
// before it are taken, instead of leaving the receiver waiting on a live peer.
TEST(PersistFailureTest, FailedWriteFailsBothSides) {
  for (std::string at : {"post", "completion"}) {
    for (std::string transport : {"tcp", "ownrma", "ofitcp", "ofishm"}) {
      auto environment = transport_environment(transport);
      environment.push_back("TETHER_INJECT_CHANNEL_WRITE_FAILURE=3");
      environment.push_back("TETHER_INJECT_WRITE_FAILURE_AT=" + at);
      auto outcome = tether::testing::run(
          {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "write-failure"}, environment, 90s);
      SCOPED_TRACE(at + " over " + transport);
      expect_every_rank_passed(outcome, {"write-failure", 2, transport, ""});
      EXPECT_NE(outcome.output.find("rank 1 saw its channel fail"), std::string::npos) << outcome.output;
    }
  }
}

// A receiver's credit that fails at its post, or a credit write that fails at its
// completion (injected), fails its channel and, told by it, the sender's, which would
// otherwise wait for that credit for ever.
TEST(PersistFailureTest, FailedCreditFailsBothSides) {
  for (auto [transport, at] : {std::pair{"tcp", "post"}, {"ownrma", "post"}, {"ofitcp", "post"}, {"tcprma", "post"},
                               {"ownrma", "completion"}, {"tcprma", "completion"}}) {
    auto environment = transport_environment(transport);
    environment.push_back("TETHER_INJECT_CREDIT_FAILURE=1");
    environment.push_back(std::string("TETHER_INJECT_WRITE_FAILURE_AT=") + at);
    auto outcome = tether::testing::run(
        {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "credit-failure"}, environment, 90s);
    SCOPED_TRACE(std::string(transport) + " at " + at);
    expect_every_rank_passed(outcome, {"credit-failure", 2, transport, ""});
    EXPECT_NE(outcome.output.find("rank 0 saw its channel fail"), std::string::npos) << outcome.output;
  }
}

// Waits for channels the peer never creates time out TETHER_CHANNEL_CONNECT_TIMEOUT after
// creation, naming the channel: many channels waited together, a start() and a receive's
// wait(). Before, only wait_connected() had a deadline (and, earlier, not over many).
TEST(PersistFailureTest, WaitsForChannelsThePeerNeverCreatesTimeOut) {
  auto environment = transport_environment("shm");
  environment.push_back("TETHER_CHANNEL_CONNECT_TIMEOUT=1s");
  environment.push_back("TETHER_CHANNEL_CLOSE_TIMEOUT=200ms");
  auto outcome = tether::testing::run(
      {TETHER_RUN_PATH, "-n", "2", "--timeout", "30s", PERSIST_CHECK_PATH, "connect-timeout"}, environment, 60s);
  expect_every_rank_passed(outcome, {"connect-timeout", 2, "shm", ""});
  EXPECT_NE(outcome.output.find("start_all over 1 channels was given 0 bytes"), std::string::npos) << outcome.output;
  // The unanswered channel, closed, waited for its handshake as long as for writes, then said so.
  EXPECT_NE(outcome.output.find("send channel with rank 1 (tag 301) closed before rank 1 created its matching"),
            std::string::npos)
      << outcome.output;
  EXPECT_NE(outcome.output.find("receive channel with rank 0 (tag 302) closed before rank 0 created"),
            std::string::npos)
      << outcome.output;
}

// A channel write that fails only after its sender closed the channel (close() gave up
// waiting for it; injected) still fails the receiver's side, told by the sender, instead of
// leaving it waiting for that message on a live peer.
TEST(PersistFailureTest, WriteFailingAfterCloseFailsTheReceiver) {
  for (std::string transport : {"tcp", "ofitcp"}) {
    auto environment = transport_environment(transport);
    environment.push_back("TETHER_INJECT_CHANNEL_WRITE_FAILURE=3");
    environment.push_back("TETHER_INJECT_WRITE_FAILURE_AT=after-close");
    environment.push_back("TETHER_CHANNEL_CLOSE_TIMEOUT=200ms");
    auto outcome = tether::testing::run(
        {TETHER_RUN_PATH, "-n", "2", "--timeout", "30s", PERSIST_CHECK_PATH, "write-failure-after-close"},
        environment, 60s);
    SCOPED_TRACE(transport);
    expect_every_rank_passed(outcome, {"write-failure-after-close", 2, transport, ""});
    EXPECT_NE(outcome.output.find("writes in flight; its buffers stay registered"), std::string::npos)
        << outcome.output;
    EXPECT_NE(outcome.output.find("rank 1 saw its channel fail"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("after close"), std::string::npos) << outcome.output;
  }
}

// `scenario` on shm-own with `injection` set: every rank passes and both say `lines`.
void expect_injected_failure_seen(const std::string& scenario, const std::string& injection,
                                  std::initializer_list<const char*> lines) {
  auto environment = transport_environment("shm");
  environment.push_back(injection);
  auto outcome = tether::testing::run({TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, scenario},
                                      environment, 90s);
  expect_every_rank_passed(outcome, {scenario, 2, "shm", ""});
  for (const char* line : lines) EXPECT_NE(outcome.output.find(line), std::string::npos) << outcome.output;
}

// A direct store whose flag line names a slot past the channel's last (injected) is refused:
// the receive side fails naming it and tells the sender, which fails too.
TEST(PersistFailureTest, CorruptFlagLineFailsBothSides) {
  expect_injected_failure_seen("corrupt-flag", "TETHER_INJECT_CORRUPT_FLAG=3",
                               {"rank 1 refused the flag", "rank 0 saw its channel fail"});
}

// A credit word counting more releases than messages started (injected) is refused: the
// sender fails naming it, instead of writing into slots the receiver holds, and tells the
// receiver, which fails too.
TEST(PersistFailureTest, CorruptCreditWordFailsBothSides) {
  expect_injected_failure_seen("corrupt-credit", "TETHER_INJECT_CORRUPT_CREDIT=2",
                               {"rank 0 refused the credit word", "rank 1 saw its channel fail"});
}

// A credit message that fails at its completion (injected) is owed again: the stream
// through 2 slots goes on whole, where its sender would have starved.
TEST(PersistFailureTest, FailedCreditMessageIsOwedAgain) {
  for (std::string transport : {"tcp", "ofitcp"}) {
    auto environment = transport_environment(transport);
    environment.push_back("TETHER_INJECT_CREDIT_FAILURE=1");
    environment.push_back("TETHER_INJECT_WRITE_FAILURE_AT=completion");
    auto outcome = tether::testing::run(
        {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "credit-owed-again"}, environment, 90s);
    SCOPED_TRACE(transport);
    expect_every_rank_passed(outcome, {"credit-owed-again", 2, transport, ""});
    EXPECT_NE(outcome.output.find("injected by TETHER_INJECT_CREDIT_FAILURE at completion"), std::string::npos)
        << outcome.output;
  }
}

// A side that closes its channel tells the other, which fails with peer_closed once it took
// what landed (receive side) or at its next start() (send side), instead of waiting for ever.
TEST(PersistFailureTest, ClosingOneSideFailsTheOther) {
  for (std::string transport : {"shm", "tcp", "ofitcp", "ofishm"}) {
    auto outcome = tether::testing::run(
        {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "peer-closed"},
        transport_environment(transport), 90s);
    SCOPED_TRACE(transport);
    expect_every_rank_passed(outcome, {"peer-closed", 2, transport, ""});
    EXPECT_NE(outcome.output.find("rank 1 saw its channel closed"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("rank 0 saw its channel closed"), std::string::npos) << outcome.output;
    EXPECT_NE(outcome.output.find("without taking the last 1 of the 2 messages"), std::string::npos) << outcome.output;
  }
}

// A receive side destroyed holding a message (and with more landed unread) says how many it
// did not release; the next pair of channels on that tag sees only its own data.
TEST(PersistFailureTest, ReceiverClosingWithMessagesUnreleasedSaysSo) {
  auto outcome = tether::testing::run(
      {TETHER_RUN_PATH, "-n", "2", "--timeout", "60s", PERSIST_CHECK_PATH, "close-in-flight"},
      transport_environment("shm"), 90s);
  expect_every_rank_passed(outcome, {"close-in-flight", 2, "shm", ""});
  const std::regex reported(R"(receive channel from rank 0 \(tag 25\) closed with [1-4] messages not released)");
  EXPECT_TRUE(std::regex_search(outcome.output, reported)) << outcome.output;
}

TEST(PersistMpirunTest, IntegrityAndManyUnderOpenMpi) {
  if (std::string(MPIRUN_PATH).empty() || ::access(MPIRUN_PATH, X_OK) != 0) GTEST_SKIP() << "mpirun not found";
  tether::testing::PrivateOmpiSession session;
  for (Case test_case : {Case{"integrity", 2, "shm", "20000"}, Case{"many", 3, "shm", ""}}) {
    std::vector<std::string> argv{MPIRUN_PATH, "-n", std::to_string(test_case.ranks), "--oversubscribe"};
    for (auto& arg : check_command(test_case)) argv.push_back(arg);
    auto outcome = tether::testing::run(argv,
                                        {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                         "OMPI_MCA_btl=self,tcp", "OMPI_MCA_pml=ob1", session.setting()},
                                        150s);
    expect_every_rank_passed(outcome, test_case);
  }
}

}  // namespace
