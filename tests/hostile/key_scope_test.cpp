// Runs tether-key-scope-check as a 2-rank job under tether-run per transport and per
// TETHER_REMOTE_KEYS, and checks what each write with a handed-out key did: with exact
// keys on a transport that checks them (ofi:shm, ofi:tcp), writes outside the channel's
// slots or the rendezvous landing buffer are refused (or, on libfabric shm, never
// answered) and leave the bytes there unchanged; with arena keys, and on shm-own (which
// maps whole arenas), they land. Registrations: one per exposed range, none for arena keys.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/launch/subprocess.hpp"

namespace {

using namespace std::chrono_literals;

struct KeyScopeCase {
  std::string transport;  // shm (shm-own), ofishm (libfabric shm), tcp (tcp;ofi_rxm on lo), tcpown (tcp-own on lo)
  std::string keys;       // exact | arena | auto (exact on these software providers)
};

std::vector<std::string> environment(const KeyScopeCase& param) {
  std::vector<std::string> env{"TETHER_REMOTE_KEYS=" + param.keys};
  if (param.transport == "shm") env.insert(env.end(), {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=own"});
  else if (param.transport == "ofishm") env.insert(env.end(), {"TETHER_SHM=on", "TETHER_SHM_TRANSPORT=ofi"});
  else if (param.transport == "tcpown")
    env.insert(env.end(), {"TETHER_SHM=off", "TETHER_NET_TRANSPORT=own", "TETHER_TCP_INTERFACE=lo"});
  else env.insert(env.end(), {"TETHER_SHM=off", "TETHER_OFI_PROVIDER=tcp", "TETHER_OFI_DOMAIN=lo"});
  return env;
}

bool keys_checked(const KeyScopeCase& param) { return param.keys != "arena" && param.transport != "shm"; }

// What rank 1 must print for a write that the key must not reach.
std::string refused_unless_arena(const KeyScopeCase& param) {
  if (!keys_checked(param)) return "landed";
  return param.transport == "ofishm" ? "unanswered" : "refused";
}

std::vector<std::string> expected_lines(const KeyScopeCase& param) {
  bool exact = keys_checked(param);
  std::string outside = refused_unless_arena(param);
  std::vector<std::string> lines{
      "rank 0: key scope passed",
      "rank 1: key scope passed",
      "rank 1: channel write inside the key's range: landed",
      "rank 1: channel write into the bait elsewhere in the arena: " + outside,
      "rank 0: channel slot holds the write",
      std::string("rank 0: channel bait ") + (exact ? "unchanged" : "overwritten"),
      std::string("rank 0: channel key registrations ") + (exact ? "2" : "0"),
      std::string("rank 1: channel key registrations ") + (exact ? "1" : "0"),
      "rank 1: rendezvous write inside the key's range: landed",
      "rank 1: rendezvous write 64 bytes before the range: " + outside,
      "rank 1: rendezvous write into the bait elsewhere in the arena: " + outside,
      std::string("rank 0: rendezvous bait ") + (exact ? "unchanged" : "overwritten"),
      std::string("rank 0: rendezvous 64 bytes before the range ") + (exact ? "unchanged" : "overwritten"),
      exact ? "rank 0: landing key: 1 range registrations, 1 released, 0 arena keys"
            : "rank 0: landing key: 0 range registrations, 0 released, 1 arena keys",
      exact ? "rank 0: put transfers: 3 range registrations, 3 released, 0 arena keys"
            : "rank 0: put transfers: 0 range registrations, 0 released, 3 arena keys"};
  if (exact) lines.push_back("rank 1: channel write 64 bytes before the range: " + outside);
  return lines;
}

class KeyScope : public ::testing::TestWithParam<KeyScopeCase> {};

TEST_P(KeyScope, WritesOutsideTheHandedOutRangeFailOnlyWithExactKeys) {
  std::vector<std::string> argv{TETHER_RUN_PATH, "-n", "2", "--timeout", "100s", KEY_SCOPE_CHECK_PATH};
  auto outcome = tether::testing::run(argv, environment(GetParam()), 120s);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_FALSE(outcome.timed_out) << outcome.output;
  for (const auto& line : expected_lines(GetParam()))
    EXPECT_NE(outcome.output.find(line), std::string::npos) << "no line '" << line << "' in:\n" << outcome.output;
}

std::string case_name(const ::testing::TestParamInfo<KeyScopeCase>& info) {
  return info.param.transport + "_" + info.param.keys;
}

INSTANTIATE_TEST_SUITE_P(Transports, KeyScope,
                         ::testing::Values(KeyScopeCase{"shm", "exact"}, KeyScopeCase{"ofishm", "exact"},
                                           KeyScopeCase{"tcp", "exact"}, KeyScopeCase{"shm", "arena"},
                                           KeyScopeCase{"ofishm", "arena"}, KeyScopeCase{"tcp", "arena"},
                                           KeyScopeCase{"tcp", "auto"}, KeyScopeCase{"tcpown", "exact"},
                                           KeyScopeCase{"tcpown", "arena"}, KeyScopeCase{"tcpown", "auto"}),
                         case_name);

}  // namespace
