// PeerHealth replays what it learnt before a callback existed: a rank that died while the
// engine was starting, and a PMIx server lost by then, still reach the engine. Each test
// has its own PeerHealth (the process-wide one is fed by PMIx events).
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/bootstrap/peer_health.hpp"

namespace {

using tether::PeerHealth;
using Report = std::pair<int, std::string>;

std::vector<Report> reports_after_setting_callback(PeerHealth& health) {
  std::vector<Report> reports;
  health.set_callback([&](int peer, std::string_view why) { reports.emplace_back(peer, why); });
  health.set_callback(nullptr);
  return reports;
}

TEST(PeerHealthTest, ADeathBeforeTheCallbackIsReplayedToIt) {
  PeerHealth health;
  health.mark_dead(3, "killed by signal 9");
  auto reports = reports_after_setting_callback(health);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].first, 3);
  EXPECT_EQ(reports[0].second, "killed by signal 9");
}

TEST(PeerHealthTest, AServerLostBeforeTheCallbackIsReplayedForEveryPeer) {
  PeerHealth health;
  health.mark_server_lost("connection closed");
  auto reports = reports_after_setting_callback(health);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].first, PeerHealth::kEveryPeer);
  EXPECT_NE(reports[0].second.find("lost the PMIx server: connection closed"), std::string::npos);
}

// A negative rank (PMIx's undefined rank, cast) is no death: it once read as kEveryPeer
// and failed every request to every peer.
TEST(PeerHealthTest, ANegativeRankIsNoDeath) {
  PeerHealth health;
  health.mark_dead(-1, "an event about PMIX_RANK_UNDEF");
  EXPECT_TRUE(reports_after_setting_callback(health).empty());
  EXPECT_FALSE(health.first_unreachable());
}

TEST(PeerHealthTest, NothingIsReplayedWhileEveryoneIsAlive) {
  PeerHealth health;
  EXPECT_TRUE(reports_after_setting_callback(health).empty());
}

}  // namespace
