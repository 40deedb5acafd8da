// Runs tether-hostile-check as a real 2-rank job under tether-run over shm-own,
// libfabric shm, tcp;ofi_rxm and tcp-own, and checks that rank 0 logged a rejection for every
// malformed message rank 1 sent, with nothing from a sanitizer, and that both passed.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/hostile/hostile_wire.hpp"
#include "tests/launch/subprocess.hpp"

namespace {

using namespace std::chrono_literals;

std::vector<std::string> transport_environment(const std::string& transport) {
  if (transport == "shm") return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own"};
  if (transport == "ofishm") return {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=ofi"};
  if (transport == "tcpown") return {"TETHER_SHM=off", "TETHER_NET_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo"};
  return {"TETHER_SHM=off", "TETHER_OFI_PROVIDER=tcp", "TETHER_OFI_DOMAIN=lo"};
}

// What rank 0 must log, besides one line per malformed message.
std::vector<std::string> expected_rejections() {
  std::vector<std::string> lines = {
      "rejected channel notification",       "no channel has that id",
      "slot beyond the channel's slots",     "length beyond the slot",
      "more credits than messages in flight", "a credit for a receive channel",
      "data for a send channel",             "dropped a write notification 0x3000fffff for no receive in flight",
      "a message whose length is not its notification's", "a credit word that names a slot",
      "a data message that names the credit slot", "a message from another rank than the channel's peer",
      "a failure notice without a known error code", "a close notice more than a slot count from this side's count",
      "rank 0: rejected 34 channel notifications"};
  for (const auto& message : tether::hostile::malformed_messages(1, 0, 2))
    if (!message.receiver_log.empty()) lines.push_back(message.receiver_log);
  return lines;
}

class HostilePeer : public ::testing::TestWithParam<std::string> {};

TEST_P(HostilePeer, ReceiverRejectsEverythingAndKeepsWorking) {
  std::vector<std::string> argv{TETHER_RUN_PATH, "-n", "2", "--timeout", "100s", HOSTILE_CHECK_PATH};
  auto outcome = tether::testing::run(argv, transport_environment(GetParam()), 120s);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_FALSE(outcome.timed_out) << outcome.output;
  for (const char* passed : {"rank 0: hostile passed", "rank 1: hostile passed"})
    EXPECT_NE(outcome.output.find(passed), std::string::npos) << outcome.output;
  // libfabric shm loses the context of the failed read (see hostile_check.cpp).
  std::string get_outcome = GetParam() == "ofishm" ? "the get from a made-up key stays pending"
                                                   : "the get from a made-up key failed with";
  EXPECT_NE(outcome.output.find(get_outcome), std::string::npos) << outcome.output;
  for (const auto& line : expected_rejections())
    EXPECT_NE(outcome.output.find(line), std::string::npos) << "no log line with '" << line << "'";
  for (const char* sanitizer : {"AddressSanitizer", "runtime error:", "LeakSanitizer"})
    EXPECT_EQ(outcome.output.find(sanitizer), std::string::npos) << outcome.output;
}

std::string transport_name(const ::testing::TestParamInfo<std::string>& param) { return param.param; }

INSTANTIATE_TEST_SUITE_P(Transports, HostilePeer, ::testing::Values("shm", "ofishm", "tcp", "tcpown"), transport_name);

}  // namespace
