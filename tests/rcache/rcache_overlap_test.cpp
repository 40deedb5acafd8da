// Page-granular overlap, sliding requests, chunking, pool memory and bad input.
#include <unistd.h>

#include <limits>
#include <vector>
#include <string>

#include "pool/rcache/watch_counts.hpp"
#include "tests/rcache/rcache_test_support.hpp"

namespace tether {
namespace {

using namespace testing;

// Overlapping entries' watches: a page leaves only with the last entry over it, whatever
// the order; a range never added releases nothing.
TEST(RcacheWatchCounts, APageIsReleasedOnlyWithTheLastRangeOverIt) {
  using Range = rcache::WatchCounts::Range;
  rcache::WatchCounts counts;
  counts.add(0x1000, 0x5000);  // A
  counts.add(0x3000, 0x8000);  // B, overlapping A on 0x3000-0x5000
  counts.add(0x3000, 0x8000);  // C, the same pages as B (another cache)
  auto released = counts.remove(std::vector<Range>{{0x3000, 0x8000}});  // B goes
  EXPECT_TRUE(released.empty());
  released = counts.remove(std::vector<Range>{{0x1000, 0x5000}});  // A goes: C still holds 0x3000-
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].start, 0x1000u);
  EXPECT_EQ(released[0].end, 0x3000u);
  EXPECT_TRUE(counts.remove(std::vector<Range>{{0x9000, 0xa000}}).empty());  // never added
  released = counts.remove(std::vector<Range>{{0x3000, 0x8000}});  // C goes: merged into one piece
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].start, 0x3000u);
  EXPECT_EQ(released[0].end, 0x8000u);
  EXPECT_EQ(counts.pieces(), 0u);
  counts.add(0x1000, 0x9000);
  counts.add(0x3000, 0x4000);  // a short entry inside a long one splits it in three
  EXPECT_EQ(counts.pieces(), 3u);
  EXPECT_TRUE(counts.remove(std::vector<Range>{{0x3000, 0x4000}}).empty());
  EXPECT_EQ(counts.pieces(), 1u) << "equal neighbours must join again";
}

TEST(RcacheOverlap, RequestInsideALiveRegistrationHitsAndKeepsItsPages) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* base = static_cast<char*>(map_pages(8));
  ASSERT_NE(base, nullptr);
  auto outer = cache->acquire(base + kPage, 3 * kPage);  // 0x1000-0x3fff
  ASSERT_TRUE(outer);
  auto inner = cache->acquire(base + 2 * kPage, kPage);  // 0x2000-0x2fff
  ASSERT_TRUE(inner);
  RcacheStats stats = cache->stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(registrar.registrations, 1u);
  outer->release();
  EXPECT_EQ(registrar.deregistrations, 0u);
  EXPECT_EQ(locked_kb(base + 2 * kPage), 12) << "releasing the first dropped pages the second holds";
  EXPECT_EQ(cache->stats().entries_in_use, 1u);
  inner->release();
  ::munmap(base, 8 * kPage);
}

TEST(RcacheOverlap, SlidingRequestsRegisterEachPageOnce) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  constexpr std::size_t kPages = 1024;  // 4 MiB
  auto* base = static_cast<char*>(map_pages(kPages));
  ASSERT_NE(base, nullptr);
  for (std::size_t i = 0; i < 1000; ++i) {
    auto handle = cache->acquire(base + i * kPage, 2 * kPage);
    ASSERT_TRUE(handle) << i << ": " << handle.error().message();
  }
  RcacheStats stats = cache->stats();
  // The first request registers 2 pages, every later one only the page it adds.
  EXPECT_EQ(stats.registrations, 1000u);
  EXPECT_EQ(stats.registered_bytes_total, 1001 * kPage);
  EXPECT_EQ(stats.hits, 999u);
  EXPECT_EQ(stats.deregistrations, 0u);
  ::munmap(base, kPages * kPage);
}

TEST(RcacheOverlap, PartlyCoveredRequestRegistersOnlyTheMissingPages) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* base = static_cast<char*>(map_pages(8));
  std::uint64_t sum = fill(base, 8 * kPage, 3);
  auto middle = cache->acquire(base + 3 * kPage, 2 * kPage);
  auto whole = cache->acquire(base, 8 * kPage);
  ASSERT_TRUE(middle && whole);
  EXPECT_EQ(whole->segment_count(), 3u);
  EXPECT_EQ(registrar.bytes, 8 * kPage);
  EXPECT_EQ(checksum_through(*whole, base, 8 * kPage), sum);
  ::munmap(base, 8 * kPage);
}

TEST(RcacheOverlap, LargeRangesAreRegisteredChunkByChunk) {
  CountingMlockRegistrar registrar;
  RcacheOptions options;
  options.chunk_bytes = 64 * 1024;
  auto cache = make_cache(registrar, options);
  constexpr std::size_t kPages = 64;  // 256 KiB, aligned to 64 KiB below
  auto* mapping = static_cast<char*>(map_pages(kPages + 16));
  auto* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(mapping) + 0xffff) & ~std::uintptr_t{0xffff});
  std::uint64_t sum = fill(base + 100, kPages * kPage - 200, 4);
  auto handle = cache->acquire(base + 100, kPages * kPage - 200);
  ASSERT_TRUE(handle);
  EXPECT_EQ(handle->segment_count(), 4u);
  for (std::size_t i = 0; i < handle->segment_count(); ++i) EXPECT_EQ(handle->segment(i).length, 64u * 1024);
  EXPECT_EQ(registrar.registrations, 4u);
  EXPECT_EQ(checksum_through(*handle, base + 100, kPages * kPage - 200), sum);
  handle->release();
  ::munmap(mapping, (kPages + 16) * kPage);
}

TEST(RcacheOverlap, PoolMemoryUsesThePoolsRegistrations) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* buffer = pinned_alloc(64 * 1024);
  ASSERT_NE(buffer, nullptr);
  auto handle = cache->acquire(buffer, 64 * 1024);
  ASSERT_TRUE(handle);
  EXPECT_TRUE(handle->from_pool());
  EXPECT_EQ(registrar.registrations, 0u);
  EXPECT_EQ(cache->stats().pool_hits, 1u);
  handle->release();
  pinned_free(buffer);
}

TEST(RcacheBadInput, ClearErrorsAndTheCacheUnchanged) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* base = static_cast<char*>(map_pages(3));
  ASSERT_EQ(::mprotect(base + kPage, kPage, PROT_NONE), 0);
  auto* edge = static_cast<char*>(map_pages(2));
  ASSERT_EQ(::munmap(edge + kPage, kPage), 0);
  struct Case {
    const void* address;
    std::size_t length;
    const char* says;
  } cases[] = {
      {base, 3 * kPage, "not mapped or not readable"},
      {edge, 2 * kPage, "not mapped or not readable"},
      {nullptr, 64, "NULL"},
      {base, 0, "zero bytes"},
      {base, std::numeric_limits<std::size_t>::max() - 16, "end of the address space"},
  };
  for (const Case& bad : cases) {
    auto refused = cache->acquire(bad.address, bad.length);
    ASSERT_FALSE(refused) << bad.says;
    EXPECT_EQ(refused.error().code, Errc::invalid_argument);
    EXPECT_NE(refused.error().message().find(bad.says), std::string::npos) << refused.error().message();
  }
  RcacheStats stats = cache->stats();
  EXPECT_EQ(registrar.registrations, 0u);
  EXPECT_EQ(stats.entries_held, 0u);
  auto good = cache->acquire(base, kPage);  // the readable page still works
  EXPECT_TRUE(good);
  ::munmap(base, 3 * kPage);
  ::munmap(edge, kPage);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(RcacheSetup, DefaultLimitsAreBoundedAndTheGlobalCacheWorks) {
  RcacheOptions options = RcacheOptions::from_config();
  long pages = ::sysconf(_SC_PHYS_PAGES);
  EXPECT_GT(options.max_count, 0u);
  EXPECT_LE(options.max_count, 1u << 20);
  EXPECT_GT(options.max_bytes, 0u);
  EXPECT_LE(options.max_bytes, static_cast<std::size_t>(pages) * 4096);
  EXPECT_EQ(options.chunk_bytes, std::size_t{2} << 20);
  EXPECT_TRUE(options.leave_pinned);
  auto cache = rcache_global();
  ASSERT_TRUE(cache) << cache.error().message();
  std::vector<char> buffer(100000, 'x');
  auto first = (*cache)->acquire(buffer.data(), buffer.size());
  auto second = (*cache)->acquire(buffer.data(), buffer.size());
  ASSERT_TRUE(first && second);
  EXPECT_GE((*cache)->stats().hits, 1u);
}

}  // namespace
}  // namespace tether
