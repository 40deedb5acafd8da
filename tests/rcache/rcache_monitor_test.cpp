// Monitor behaviour: bounded bookkeeping under churn, many threads against an unmapper,
// re-entry from inside the cache and the hooks.
#include <sys/syscall.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"
#include "runtime/base/log.hpp"
#include "tests/rcache/rcache_test_support.hpp"

namespace tether {
namespace {

using namespace testing;

long resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST(RcacheMonitor, ChurnWithoutCacheCallsStaysBounded) {
  rcache::interpose_enable(true);
  auto started = rcache::uffd_start();
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* kept = map_pages(4);
  { ASSERT_TRUE(cache->acquire(kept, 4 * kPage)); }
  long before = resident_kb();
  std::uint64_t events = rcache::monitor_events();
  std::mt19937 random(7);
  for (int i = 0; i < 20000; ++i) {
    void* block = std::malloc(random() % (512 * 1024) + 1);
    static_cast<char*>(block)[0] = 1;
    std::free(block);
    void* mapped = map_pages(16);
    static_cast<char*>(mapped)[0] = 1;
    ::munmap(mapped, 16 * kPage);
  }
  RcacheStats stats = cache->stats();
  EXPECT_GE(rcache::monitor_events() - events, 20000u) << "the hooks did not see the munmaps";
  EXPECT_EQ(stats.entries_held, 1u);
  EXPECT_EQ(stats.invalidations, 0u);
#ifndef TETHER_SANITIZE_ADDRESS  // ASan's free() quarantine holds tens of MiB
  EXPECT_LT(resident_kb() - before, 8 * 1024) << "the monitor's bookkeeping grew";
#else
  static_cast<void>(before);
#endif
  auto again = cache->acquire(kept, 4 * kPage);  // and the pending queue drains
  ASSERT_TRUE(again);
  EXPECT_EQ(cache->stats().hits, 1u);
  again->release();
  ::munmap(kept, 4 * kPage);
  static_cast<void>(started);
}

TEST(RcacheMonitor, ConcurrentHitsAndMissesWhileAnotherThreadRemaps) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  constexpr std::size_t kBuffers = 32;
  auto* stable = static_cast<char*>(map_pages(kBuffers * 4));
  std::vector<std::uint64_t> sums(kBuffers);
  for (std::size_t i = 0; i < kBuffers; ++i) sums[i] = fill(stable + i * 4 * kPage, 4 * kPage, i);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 random(seed);
    for (int i = 0; i < 3000 && failures == 0; ++i) {
      std::size_t which = random() % kBuffers;
      auto handle = cache->acquire(stable + which * 4 * kPage, 4 * kPage);
      if (!handle || checksum_through(*handle, stable + which * 4 * kPage, 4 * kPage) != sums[which]) ++failures;
      if (i % 50 == 0) {  // a miss on fresh memory
        std::vector<char> fresh(3 * kPage, static_cast<char>(i));
        auto missed = cache->acquire(fresh.data(), fresh.size());
        if (!missed) ++failures;
      }
    }
  };
  auto remapper = [&] {
    void* address = map_pages(8);
    std::uint64_t previous_key = 0;
    for (int round = 0; !stop; ++round) {
      std::uint64_t sum = fill(address, 8 * kPage, static_cast<std::uint64_t>(round));
      auto handle = cache->acquire(address, 8 * kPage);
      if (!handle || checksum_through(*handle, address, 8 * kPage) != sum) ++failures;
      if (handle && handle->segment(0).registrations[0].remote_key == previous_key) ++failures;
      if (handle) previous_key = handle->segment(0).registrations[0].remote_key;
      handle->release();
      ::munmap(address, 8 * kPage);
      if (map_pages(8, address) != address) address = map_pages(8);
    }
    ::munmap(address, 8 * kPage);
  };
  std::thread unmapper(remapper);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 8; ++t) threads.emplace_back(worker, t + 1);
  for (auto& thread : threads) thread.join();
  stop = true;
  unmapper.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GT(cache->stats().hits, 8u * 2000);
  EXPECT_GT(cache->stats().invalidations, 0u);
  ::munmap(stable, kBuffers * 4 * kPage);
}

// Knows which registrations are live, so a holder can check that its own was not taken
// away by an eviction on another thread.
class LiveKeysRegistrar final : public CountingMlockRegistrar {
 public:
  std::string_view name() const noexcept override { return "live-keys"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    auto done = CountingMlockRegistrar::register_range(address, length, access);
    if (done) {
      std::lock_guard guard(mutex_);
      live_.insert(done->remote_key);
    }
    return done;
  }
  void deregister(const Registration& registration) noexcept override {
    {
      std::lock_guard guard(mutex_);
      live_.erase(registration.remote_key);
    }
    CountingMlockRegistrar::deregister(registration);
  }
  bool live(std::uint64_t key) {
    std::lock_guard guard(mutex_);
    return live_.count(key) != 0;
  }

 private:
  std::mutex mutex_;
  std::set<std::uint64_t> live_;
};

// Four threads acquire 32 buffers through a cache that holds 8 entries, so every few
// acquires evict; a quarter of the handles are released by another thread, and a fifth
// thread invalidates random buffers all along (as munmap hooks do). References are
// counted per thread, so this checks that eviction and invalidation sum them right: a
// held registration stays live until its handle goes, and at the end nothing is held and
// every registration went.
TEST(RcacheMonitor, ConcurrentEvictionNeverTakesAHeldEntry) {
  LiveKeysRegistrar registrar;
  RcacheOptions options;
  options.max_count = 8;
  options.max_bytes = std::size_t{1} << 30;
  options.non_nesting = {false};  // one deregistration per entry, with its own key
  Registrar* registrars[] = {&registrar};
  auto created = RegistrationCache::create(registrars, options);
  ASSERT_TRUE(created) << created.error().message();
  auto& cache = *created;
  constexpr std::size_t kBuffers = 32;
  auto* buffers = static_cast<char*>(map_pages(kBuffers * 4));
  std::vector<std::uint64_t> sums(kBuffers);
  for (std::size_t i = 0; i < kBuffers; ++i) sums[i] = fill(buffers + i * 4 * kPage, 4 * kPage, i);
  std::mutex handed_mutex;
  std::vector<RcacheHandle> handed_over;  // released by whichever thread comes next
  std::atomic<int> failures{0};
  auto all_live = [&](const RcacheHandle& handle) {
    for (std::size_t s = 0; s < handle.segment_count(); ++s)
      if (!registrar.live(handle.segment(s).registrations[0].remote_key)) return false;
    return true;
  };
  auto worker = [&](unsigned seed) {
    std::mt19937 random(seed);
    for (int i = 0; i < 4000 && failures == 0; ++i) {
      std::size_t which = random() % kBuffers;
      auto handle = cache->acquire(buffers + which * 4 * kPage, 4 * kPage);
      if (!handle) {
        if (handle.error().code != Errc::limit_exceeded) ++failures;  // all 8 held: allowed
        continue;
      }
      if (checksum_through(*handle, buffers + which * 4 * kPage, 4 * kPage) != sums[which]) ++failures;
      if (!all_live(*handle)) ++failures;
      std::this_thread::yield();  // hold it a while: evictions and invalidations go on
      if (!all_live(*handle)) ++failures;
      std::lock_guard guard(handed_mutex);
      if (!handed_over.empty()) {  // another thread's handle
        if (!all_live(handed_over.back())) ++failures;
        handed_over.pop_back();
      }
      if (i % 4 == 0) handed_over.push_back(std::move(*handle));
    }
  };
  std::atomic<bool> stop{false};
  std::thread invalidator([&] {  // the even buffers only: the odd ones fill the cache and make it evict
    std::mt19937 random(99);
    while (!stop) cache->invalidate(buffers + (random() % kBuffers & ~std::size_t{1}) * 4 * kPage, 4 * kPage);
  });
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(worker, t + 11);
  for (auto& thread : threads) thread.join();
  stop = true;
  invalidator.join();
  handed_over.clear();
  EXPECT_EQ(failures, 0);
  RcacheStats stats = cache->stats();
  EXPECT_EQ(stats.entries_in_use, 0u);
  EXPECT_GT(stats.evictions, 10u);  // by the odd buffers, however the threads are scheduled
  EXPECT_GT(stats.invalidations, 1000u);
  cache->flush();
  EXPECT_EQ(cache->stats().entries_held, 0u);
  EXPECT_EQ(registrar.registrations.load(), registrar.deregistrations.load());
  ::munmap(buffers, kBuffers * 4 * kPage);
}

// Unmaps and logs from inside register_range and deregister: the monitor is re-entered
// on the miss path.
class ReenteringRegistrar final : public CountingMlockRegistrar {
 public:
  std::string_view name() const noexcept override { return "reentering"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    churn();
    return CountingMlockRegistrar::register_range(address, length, access);
  }
  void deregister(const Registration& registration) noexcept override {
    churn();
    CountingMlockRegistrar::deregister(registration);
  }

 private:
  static void churn() noexcept {
    void* scratch = map_pages(2);
    std::vector<int> allocates(1000, 1);
    log::info("rcache-test", "registrar re-entering the monitor ({} ints)", allocates.size());
    ::munmap(scratch, 2 * kPage);
  }
};

TEST(RcacheMonitor, HookReentryFromTheMissPathAndFromInsideTheCache) {
  rcache::interpose_enable(true);
  ReenteringRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* base = static_cast<char*>(map_pages(8));
  std::uint64_t sum = fill(base, 8 * kPage, 1);
  {
    auto handle = cache->acquire(base, 8 * kPage);
    ASSERT_TRUE(handle);
    EXPECT_EQ(checksum_through(*handle, base, 8 * kPage), sum);
  }
  // A hook firing while this thread is inside the cache queues its range ...
  {
    rcache::CriticalSection inside;
    cache->invalidate(base, 8 * kPage);
  }
  EXPECT_EQ(cache->stats().invalidations, 0u);
  auto again = cache->acquire(base, 8 * kPage);  // ... and the next acquire applies it
  ASSERT_TRUE(again);
  // Lower bounds: the registrar's own munmap inside the miss path is reported by the
  // monitor too, and about one run in six it invalidates once more (not yet explained).
  std::uint64_t invalidated = cache->stats().invalidations;
  EXPECT_GE(invalidated, 1u);
  EXPECT_GE(registrar.registrations, 2u);
  EXPECT_EQ(checksum_through(*again, base, 8 * kPage), sum);
  again->release();
  // More queued ranges than slots: nothing is lost, everything is dropped.
  {
    rcache::CriticalSection inside;
    for (int i = 0; i < 1000; ++i) cache->invalidate(reinterpret_cast<void*>(0x1000 * (i + 1)), 0x1000);
  }
  auto after = cache->acquire(base, 8 * kPage);
  ASSERT_TRUE(after);
  EXPECT_GT(cache->stats().invalidations, invalidated);
  after->release();
  cache->flush();
  EXPECT_EQ(cache->stats().entries_held, 0u);
  ::munmap(base, 8 * kPage);
}

}  // namespace
}  // namespace tether
