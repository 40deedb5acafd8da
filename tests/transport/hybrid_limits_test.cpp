// The hybrid transport's limits: the stricter of its two backends' for each kind, where an
// RMA limit of 0 is none (shm-own, tcp-own) and so the other backend's holds.
#include <gtest/gtest.h>

#include "transport/hybrid/hybrid_transport.hpp"

namespace {

using tether::transport::Limits;
using tether::transport::hybrid::combined_limits;

constexpr std::size_t kProviderRma = std::size_t{1} << 30;

Limits shm_own_like() { return Limits{8256, 0, 8256, 8192, 8192}; }
Limits provider_like() { return Limits{kProviderRma, kProviderRma, 64, 1024, 2048}; }

TEST(HybridLimits, TheNetworkRmaLimitHoldsBesideABackendWithNone) {
  for (auto [local, network] : {std::pair{shm_own_like(), provider_like()}, std::pair{provider_like(), shm_own_like()}}) {
    Limits both = combined_limits(local, network);
    EXPECT_EQ(both.max_rma_bytes, kProviderRma);
    EXPECT_EQ(both.max_message_bytes, 8256u);
    EXPECT_EQ(both.inject_bytes, 64u);
    EXPECT_EQ(both.send_queue_depth, 1024u);
    EXPECT_EQ(both.receive_queue_depth, 2048u);
  }
}

TEST(HybridLimits, TwoRmaLimitsGiveTheSmallerAndTwoNonesStayNone) {
  Limits small = provider_like();
  small.max_rma_bytes = 4096;
  EXPECT_EQ(combined_limits(small, provider_like()).max_rma_bytes, 4096u);
  EXPECT_EQ(combined_limits(shm_own_like(), shm_own_like()).max_rma_bytes, 0u);
}

}  // namespace
