// Limits by count and by bytes, both policies, and registrars running out of resources.
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/rcache/rcache_test_support.hpp"
#include "tests/support/privileges.hpp"
#include "tests/unit/pool_test_support.hpp"

namespace tether {
namespace {

using namespace testing;

struct Pages {
  explicit Pages(std::size_t pages) : base(static_cast<char*>(map_pages(pages))), count(pages) {}
  ~Pages() { ::munmap(base, count * kPage); }
  // Every other page, so that no two requests share or touch a page.
  char* nth(std::size_t index) const { return base + 2 * index * kPage; }
  char* base;
  std::size_t count;
};

TEST(RcacheLimits, EvictAndRetryWhenTheRegistrarRunsOut) {
  FailingPastCapacityRegistrar registrar(4 * kPage);
  auto cache = make_cache(registrar);
  Pages pages(16);
  for (std::size_t i = 0; i < 4; ++i) ASSERT_TRUE(cache->acquire(pages.nth(i), kPage));  // 4 idle entries
  auto fifth = cache->acquire(pages.nth(4), kPage);
  ASSERT_TRUE(fifth) << fifth.error().message();
  EXPECT_GE(cache->stats().evictions, 1u);
  EXPECT_EQ(cache->stats().entries_held, 4u);
  // Every entry in use: nothing to evict, so a clear error and no hang.
  std::vector<RcacheHandle> held;
  for (std::size_t i = 5; i < 8; ++i) {
    auto handle = cache->acquire(pages.nth(i), kPage);
    ASSERT_TRUE(handle) << handle.error().message();
    held.push_back(std::move(*handle));
  }
  auto refused = cache->acquire(pages.nth(0), kPage);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::memlock_limit);
  EXPECT_NE(refused.error().message().find("no idle entry is left to evict"), std::string::npos)
      << refused.error().message();
  EXPECT_EQ(cache->stats().entries_held, 4u) << "a failed acquire changed the cache";
}

TEST(RcacheLimits, FailingRegistrarWithNothingToEvictReportsTheLimit) {
  FailingOnNthCallRegistrar registrar(1, EAGAIN);
  Registrar* registrars[] = {&registrar};
  RcacheOptions options;
  options.non_nesting = {true};
  auto cache = RegistrationCache::create(registrars, options);
  ASSERT_TRUE(cache);
  Pages pages(2);
  auto refused = (*cache)->acquire(pages.base, kPage);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::memlock_limit);
  EXPECT_NE(refused.error().message().find("RLIMIT_MEMLOCK"), std::string::npos) << refused.error().message();
  EXPECT_EQ((*cache)->stats().entries_held, 0u);
}

TEST(RcacheLimits, RlimitMemlockWithoutCapIpcLock) {
  int status = run_with_watchdog([] {
    if (!drop_ipc_lock() || !limit_memlock(64 * kPage)) return 10;
    CountingMlockRegistrar registrar;
    auto cache = make_cache(registrar);
    if (!cache) return 11;
    Pages pages(128);
    for (std::size_t i = 0; i < 3; ++i) {  // 48 pages pinned, idle
      if (!cache->acquire(pages.base + i * 16 * kPage, 16 * kPage)) return 12;
    }
    auto big = cache->acquire(pages.base + 64 * kPage, 32 * kPage);  // needs eviction
    if (!big) return 13;
    if (cache->stats().evictions == 0) return 14;
    auto more = cache->acquire(pages.base + 96 * kPage, 32 * kPage);  // 64 held + 32: over
    std::vector<RcacheHandle> keep;
    if (more) keep.push_back(std::move(*more));
    auto refused = cache->acquire(pages.base, 32 * kPage);
    if (refused) return 15;
    if (refused.error().code != Errc::memlock_limit) return 16;
    if (refused.error().message().find("RLIMIT_MEMLOCK is 256K") == std::string::npos) return 17;
    return 0;
  });
  EXPECT_EQ(status, 0);
}

struct LimitCase {
  RcacheOverLimit policy;
  bool by_count;
};

class RcacheLimitTest : public ::testing::TestWithParam<LimitCase> {};

TEST_P(RcacheLimitTest, EveryEntryInUse) {
  CountingMlockRegistrar registrar;
  RcacheOptions options;
  options.over_limit = GetParam().policy;
  options.max_count = GetParam().by_count ? 4 : 1000;
  options.max_bytes = GetParam().by_count ? (1 << 30) : 4 * kPage;
  auto cache = make_cache(registrar, options);
  Pages pages(16);
  // Idle entries are evicted to stay under the limit.
  for (std::size_t i = 0; i < 6; ++i) ASSERT_TRUE(cache->acquire(pages.nth(i), kPage));
  EXPECT_EQ(cache->stats().entries_held, 4u);
  EXPECT_EQ(cache->stats().evictions, 2u);
  std::vector<RcacheHandle> held;
  for (std::size_t i = 0; i < 4; ++i) held.push_back(std::move(*cache->acquire(pages.nth(i), kPage)));
  auto over = cache->acquire(pages.nth(7), kPage);
  if (GetParam().policy == RcacheOverLimit::fail) {
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error().code, Errc::limit_exceeded);
    std::string knob = GetParam().by_count ? "TETHER_RCACHE_MAX_COUNT" : "TETHER_RCACHE_MAX_BYTES";
    EXPECT_NE(over.error().message().find(knob), std::string::npos) << over.error().message();
    EXPECT_EQ(cache->stats().entries_held, 4u);
  } else {
    ASSERT_TRUE(over) << over.error().message();
    EXPECT_EQ(cache->stats().uncached, 1u);
    EXPECT_EQ(cache->stats().entries_held, 5u);
    over->release();  // an uncached registration ends with its handle
    EXPECT_EQ(cache->stats().entries_held, 4u);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, RcacheLimitTest,
                         ::testing::Values(LimitCase{RcacheOverLimit::register_uncached, true},
                                           LimitCase{RcacheOverLimit::register_uncached, false},
                                           LimitCase{RcacheOverLimit::fail, true},
                                           LimitCase{RcacheOverLimit::fail, false}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.policy == RcacheOverLimit::fail ? "fail" : "uncached") +
                                  (param_info.param.by_count ? "_count" : "_bytes");
                         });

TEST(RcacheLimits, LeavePinnedOffDeregistersAtLastRelease) {
  CountingMlockRegistrar registrar;
  RcacheOptions options;
  options.leave_pinned = false;
  auto cache = make_cache(registrar, options);
  Pages pages(4);
  auto first = cache->acquire(pages.base, 2 * kPage);
  auto second = cache->acquire(pages.base, kPage);
  ASSERT_TRUE(first && second);
  first->release();
  EXPECT_EQ(cache->stats().entries_held, 1u);
  second->release();
  EXPECT_EQ(cache->stats().entries_held, 0u);
  EXPECT_EQ(registrar.deregistrations, 1u);
  EXPECT_EQ(locked_kb(pages.base), 0);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// Failure injection: refuses, with EEXIST, a range starting where one it holds starts
// (CUDA IPC's "already mapped" when a freed buffer comes back larger at the same base).
class RefusingSameBaseRegistrar final : public testing::CountingMlockRegistrar {
 public:
  std::string_view name() const noexcept override { return "refusing-same-base"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    std::lock_guard guard(mutex_);
    if (bases_.count(address) != 0)
      return make_error(Errc::registration_failed, "already mapped", "evict it", EEXIST);
    bases_.insert(address);
    return CountingMlockRegistrar::register_range(address, length, access);
  }
  void deregister(const Registration& registration) noexcept override {
    {
      std::lock_guard guard(mutex_);
      bases_.erase(registration.address);
    }
    CountingMlockRegistrar::deregister(registration);
  }

 private:
  std::mutex mutex_;
  std::set<void*> bases_;
};

TEST(RcacheLimits, AlreadyRegisteredAnswerEvictsTheOldEntryAndRetriesOnce) {
  RefusingSameBaseRegistrar registrar;
  auto cache = testing::make_cache(registrar);
  void* base = testing::map_pages(16);
  { ASSERT_TRUE(cache->acquire(base, 8 * testing::kPage, Access::local_read)); }  // idle
  auto larger = cache->acquire(base, 16 * testing::kPage, Access::all);  // needs more rights
  ASSERT_TRUE(larger) << larger.error().message();
  EXPECT_EQ(cache->stats().evictions, 1u);
  EXPECT_EQ(registrar.registrations, 2u);
  EXPECT_EQ(larger->segment(0).length, 16 * testing::kPage);
  larger->release();
  ::munmap(base, 16 * testing::kPage);
}

}  // namespace
}  // namespace tether
