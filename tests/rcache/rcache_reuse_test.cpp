// Memory freed and mapped again at the same address never reuses a stale registration.
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "pool/rcache/monitor.hpp"
#include "tests/rcache/rcache_test_support.hpp"

namespace tether {
namespace {

using namespace testing;

enum class Unmap { interposed_call, raw_syscall_seen_by_uffd };

void start_monitor(Unmap way) {
  rcache::interpose_enable(true);
  if (way == Unmap::raw_syscall_seen_by_uffd) {
    auto started = rcache::uffd_start();
    ASSERT_TRUE(started) << started.error().message();
  }
}

int unmap(void* address, std::size_t length, Unmap way) {
  if (way == Unmap::interposed_call) return ::munmap(address, length);
  return static_cast<int>(::syscall(SYS_munmap, address, length));  // only uffd sees this
}

class RcacheReuseTest : public ::testing::TestWithParam<Unmap> {
 protected:
  void SetUp() override { start_monitor(GetParam()); }
};

// Mallocs two adjacent 32 KiB blocks, acquires and releases the first, frees both so that
// they coalesce; returns where the first was (0 if glibc did not place them adjacent).
std::uintptr_t register_and_free_adjacent(RegistrationCache& cache) {
  constexpr std::size_t kSize = 32 * 1024;
  void* first = std::calloc(1, kSize);
  void* second = std::calloc(1, kSize);
  auto address = reinterpret_cast<std::uintptr_t>(first);
  bool adjacent = reinterpret_cast<std::uintptr_t>(second) == address + kSize + 16;
  bool acquired = adjacent && cache.acquire(first, kSize).has_value();
  std::free(second);
  std::free(first);
  return acquired ? address : 0;
}

TEST(RcacheReuse, FreedSmallBlockComesBackLargerAndMisses) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  std::uintptr_t small_address = register_and_free_adjacent(*cache);
  if (small_address == 0) GTEST_SKIP() << "glibc did not place two 32 KiB blocks next to each other";
  void* large = std::malloc(64 * 1024);
  ASSERT_NE(large, nullptr);
  if (reinterpret_cast<std::uintptr_t>(large) != small_address) {
    std::free(large);
    GTEST_SKIP() << "glibc did not return the same base";
  }
  std::uint64_t misses = cache->stats().misses;
  std::uint64_t expected = fill(large, 64 * 1024, 7);
  auto handle = cache->acquire(large, 64 * 1024);
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_GT(cache->stats().misses, misses) << "the 64 KiB request must register its new pages";
  EXPECT_EQ(checksum_through(*handle, large, 64 * 1024), expected);
  std::uintptr_t end = reinterpret_cast<std::uintptr_t>(large) + 64 * 1024;
  RcacheSegment last = handle->segment_at(reinterpret_cast<void*>(end - 1));
  EXPECT_GE(reinterpret_cast<std::uintptr_t>(last.address) + last.length, end);
  handle->release();
  std::free(large);
}

// After the unmap and a new mapping at the same address holding `new_sum`: the cache
// registers afresh (not the key it had) and the bytes read through it are the new ones.
void expect_fresh_registration(RegistrationCache& cache, void* pages, std::uint64_t old_key, std::uint64_t new_sum) {
  auto handle = cache.acquire(pages, 16 * kPage);
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_NE(handle->segment(0).registrations[0].remote_key, old_key) << "a stale registration was reused";
  EXPECT_EQ(checksum_through(*handle, pages, 16 * kPage), new_sum);
  EXPECT_GE(cache.stats().invalidations, 1u);
  handle->release();
}

TEST_P(RcacheReuseTest, RemappedAddressSeesNewData) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* first = map_pages(16);
  ASSERT_NE(first, nullptr);
  std::uint64_t old_sum = fill(first, 16 * kPage, 1);
  std::uint64_t old_key = 0;
  {
    auto handle = cache->acquire(first, 16 * kPage);
    ASSERT_TRUE(handle) << handle.error().message();
    EXPECT_EQ(checksum_through(*handle, first, 16 * kPage), old_sum);
    old_key = handle->segment(0).registrations[0].remote_key;
  }
  ASSERT_EQ(unmap(first, 16 * kPage, GetParam()), 0);
  REMAP_OR_SKIP(first, 16);
  void* second = first;
  std::uint64_t new_sum = fill(second, 16 * kPage, 2);
  ASSERT_NE(new_sum, old_sum);
  expect_fresh_registration(*cache, second, old_key, new_sum);
  ::munmap(second, 16 * kPage);
}

TEST_P(RcacheReuseTest, ReleasingTheStaleHandleKeepsTheNewRegistration) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* address = map_pages(16);
  ASSERT_NE(address, nullptr);
  fill(address, 16 * kPage, 3);
  auto stale = cache->acquire(address, 16 * kPage);
  ASSERT_TRUE(stale);
  ASSERT_EQ(unmap(address, 16 * kPage, GetParam()), 0);
  REMAP_OR_SKIP(address, 16);
  std::uint64_t sum = fill(address, 16 * kPage, 4);
  auto fresh = cache->acquire(address, 16 * kPage);
  ASSERT_TRUE(fresh);
  EXPECT_NE(fresh->segment(0).registrations[0].remote_key, stale->segment(0).registrations[0].remote_key);
  EXPECT_EQ(locked_kb(address), 64);
  stale->release();  // must not unlock the pages the fresh registration holds
  EXPECT_EQ(locked_kb(address), 64) << "releasing the stale handle unpinned the new registration";
  EXPECT_EQ(checksum_through(*fresh, address, 16 * kPage), sum);
  // Its monitoring survives too: unmapping again invalidates the fresh entry.
  std::uint64_t invalidations = cache->stats().invalidations;
  ASSERT_EQ(unmap(address, 16 * kPage, GetParam()), 0);
  REMAP_OR_SKIP(address, 16);
  EXPECT_EQ(cache->stats().invalidations, invalidations + 1);
  auto third = cache->acquire(address, 16 * kPage);
  ASSERT_TRUE(third);
  EXPECT_NE(third->segment(0).registrations[0].remote_key, fresh->segment(0).registrations[0].remote_key);
  fresh->release();
  third->release();
  ::munmap(address, 16 * kPage);
}

TEST_P(RcacheReuseTest, PartialUnmapOfTheMiddle) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* base = static_cast<char*>(map_pages(16));
  ASSERT_NE(base, nullptr);
  fill(base, 16 * kPage, 5);
  { ASSERT_TRUE(cache->acquire(base, 16 * kPage)); }
  ASSERT_EQ(unmap(base + 6 * kPage, 4 * kPage, GetParam()), 0);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  cache->flush();  // the entry is deregistered: no page on either side of the hole stays locked
  EXPECT_EQ(locked_kb(base), 0);
  EXPECT_EQ(locked_kb(base + 10 * kPage), 0) << "pages past the hole stayed locked";
  std::uint64_t registrations = registrar.registrations;
  std::uint64_t head = fill(base, 6 * kPage, 6);
  auto front = cache->acquire(base, 6 * kPage);
  ASSERT_TRUE(front) << front.error().message();
  EXPECT_EQ(checksum_through(*front, base, 6 * kPage), head);
  auto back = cache->acquire(base + 10 * kPage, 6 * kPage);
  ASSERT_TRUE(back);
  EXPECT_EQ(registrar.registrations, registrations + 2);
  auto hole = cache->acquire(base + 5 * kPage, 2 * kPage);
  ASSERT_FALSE(hole);
  EXPECT_EQ(hole.error().code, Errc::invalid_argument);
  front->release();
  back->release();
  ::munmap(base, 6 * kPage);
  ::munmap(base + 10 * kPage, 6 * kPage);
}

// A request needing more access than the entry at its first page registers a new entry
// over it. One that covers the old entry wholly takes every page slot it had: the old
// one could never be hit nor invalidated again, so it goes at once; unmapping then leaves
// nothing registered.
TEST_P(RcacheReuseTest, AnEntryCoveredByOneWithMoreAccessGoesAtOnce) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* base = map_pages(16);
  ASSERT_NE(base, nullptr);
  { ASSERT_TRUE(cache->acquire(base, 8 * kPage, Access::local_read)); }
  {
    auto wider = cache->acquire(base, 16 * kPage, Access::all);
    ASSERT_TRUE(wider) << wider.error().message();
    EXPECT_EQ(registrar.registrations, 2u);
    EXPECT_EQ(cache->stats().deregistrations, 1u) << "the covered entry stayed registered";
    EXPECT_EQ(cache->stats().entries_held, 1u);
  }
  ASSERT_EQ(unmap(base, 16 * kPage, GetParam()), 0);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  cache->flush();
  EXPECT_EQ(cache->stats().entries_held, 0u);
  EXPECT_EQ(cache->stats().deregistrations, 2u);
}

TEST(RcacheReuse, MremapMovingARange) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* old_address = map_pages(8);
  void* target = map_pages(16);
  ASSERT_TRUE(old_address != nullptr && target != nullptr);
  std::uint64_t sum = fill(old_address, 8 * kPage, 8);
  { ASSERT_TRUE(cache->acquire(old_address, 8 * kPage)); }
  // One entry, or two when the 8 pages straddle a TETHER_RCACHE_CHUNK boundary.
  std::uint64_t entries = cache->stats().entries_held;
  ASSERT_GE(entries, 1u);
  void* moved = ::mremap(old_address, 8 * kPage, 16 * kPage, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  ASSERT_EQ(moved, target);
  EXPECT_EQ(cache->stats().invalidations, entries);
  auto handle = cache->acquire(moved, 8 * kPage);
  ASSERT_TRUE(handle);
  EXPECT_EQ(checksum_through(*handle, moved, 8 * kPage), sum);
  auto gone = cache->acquire(old_address, 8 * kPage);
  ASSERT_FALSE(gone) << "the old range is unmapped";
  EXPECT_EQ(gone.error().code, Errc::invalid_argument);
  handle->release();
  ::munmap(moved, 16 * kPage);
}

// MADV_DONTNEED is refused on locked pages (still reported); MADV_DONTNEED_LOCKED (Linux
// 5.18) drops them, so an entry left valid would name pages that are gone.
TEST(RcacheReuse, MadviseDontneedInvalidates) {
  rcache::interpose_enable(true);
  for (int advice : {MADV_DONTNEED, MADV_DONTNEED_LOCKED}) {
    CountingMlockRegistrar registrar;
    auto cache = make_cache(registrar);
    void* address = map_pages(8);
    fill(address, 8 * kPage, 1);
    { ASSERT_TRUE(cache->acquire(address, 8 * kPage)); }
    ::madvise(address, 8 * kPage, advice);
    EXPECT_EQ(cache->stats().invalidations, 1u) << "advice " << advice;
    auto handle = cache->acquire(address, 8 * kPage);
    ASSERT_TRUE(handle);
    EXPECT_EQ(registrar.registrations, 2u) << "advice " << advice;
    handle->release();
    ::munmap(address, 8 * kPage);
  }
}

TEST(RcacheReuse, FreeOfAnMmappedBlockIsSeenByUserfaultfd) {
#if defined(TETHER_SANITIZE_THREAD) || defined(TETHER_SANITIZE_ADDRESS)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc malloc: free() does not unmap";
#endif
  rcache::interpose_enable(true);
  auto started = rcache::uffd_start();
  if (!started) GTEST_SKIP() << started.error().message();
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  constexpr std::size_t kSize = 1 << 20;  // above the mmap threshold: free() unmaps it inside glibc
  void* block = std::malloc(kSize);
  ASSERT_NE(block, nullptr);
  { ASSERT_TRUE(cache->acquire(block, kSize)); }
  std::free(block);
  EXPECT_GE(cache->stats().invalidations, 1u) << "free() of an mmapped block went unnoticed";
  void* again = std::malloc(kSize);
  std::uint64_t sum = fill(again, kSize, 9);
  auto handle = cache->acquire(again, kSize);
  ASSERT_TRUE(handle);
  EXPECT_EQ(checksum_through(*handle, again, kSize), sum);
  handle->release();
  std::free(again);
}

// Two caches hold the same pages; one lets them go. The other's registration must still
// be invalidated by an unmapping only userfaultfd sees: a cache's release must not take
// the watch off pages another cache still holds.
TEST_P(RcacheReuseTest, AnotherCacheLettingGoKeepsThePagesWatched) {
  CountingMlockRegistrar registrar_a;
  CountingMlockRegistrar registrar_b;
  auto cache_a = make_cache(registrar_a);
  auto cache_b = make_cache(registrar_b);
  void* pages = map_pages(16);
  ASSERT_NE(pages, nullptr);
  fill(pages, 16 * kPage, 1);
  std::uint64_t old_key = 0;
  {
    ASSERT_TRUE(cache_a->acquire(pages, 16 * kPage));
    auto handle = cache_b->acquire(pages, 16 * kPage);
    ASSERT_TRUE(handle) << handle.error().message();
    old_key = handle->segment(0).registrations[0].remote_key;
  }
  cache_a->flush();
  ASSERT_EQ(unmap(pages, 16 * kPage, GetParam()), 0);
  REMAP_OR_SKIP(pages, 16);
  expect_fresh_registration(*cache_b, pages, old_key, fill(pages, 16 * kPage, 2));
  ::munmap(pages, 16 * kPage);
}

// A cached range's key before it goes: acquired and released, so the entry stays idle.
std::uint64_t cached_key(RegistrationCache& cache, void* pages) {
  auto handle = cache.acquire(pages, 16 * kPage);
  return handle ? handle->segment(0).registrations[0].remote_key : 0;
}

// 16 fresh pages, filled and cached idle; their key in `key`.
void* cached_fresh_pages(RegistrationCache& cache, std::uint64_t& key) {
  void* pages = map_pages(16);
  if (pages == nullptr) return nullptr;
  fill(pages, 16 * kPage, 1);
  key = cached_key(cache, pages);
  return pages;
}

// A private SysV segment of 16 pages attached at `at` (nullptr: anywhere) with `flags`,
// removed at its last detach; (void*)-1 on failure.
void* attach_segment(const void* at, int flags) {
  int id = ::shmget(IPC_PRIVATE, 16 * kPage, IPC_CREAT | 0600);
  if (id < 0) return reinterpret_cast<void*>(-1);
  void* attached = ::shmat(id, at, flags);
  ::shmctl(id, IPC_RMID, nullptr);
  return attached;
}

// mmap(MAP_FIXED) over a cached range replaces its pages: the hooks see it with no uffd
// (which would report it too, for the ranges it watches).
TEST(RcacheReuse, MmapFixedOverACachedRangeIsSeenByTheHooks) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  std::uint64_t old_key = 0;
  void* pages = cached_fresh_pages(*cache, old_key);
  ASSERT_TRUE(pages != nullptr && old_key != 0);
  ASSERT_EQ(::mmap(pages, 16 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), pages);
  expect_fresh_registration(*cache, pages, old_key, fill(pages, 16 * kPage, 2));
  EXPECT_EQ(registrar.registrations, 2u);
  ::munmap(pages, 16 * kPage);
}

// A SysV segment is detached and another attached at the same address: no uffd event
// comes for either, so only the shmat/shmdt hooks can tell (under both monitors).
TEST_P(RcacheReuseTest, ShmdtOfACachedSegmentInvalidates) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* at = attach_segment(nullptr, 0);
  ASSERT_NE(at, reinterpret_cast<void*>(-1)) << std::strerror(errno);
  fill(at, 16 * kPage, 1);
  std::uint64_t old_key = cached_key(*cache, at);
  ASSERT_NE(old_key, 0u);
  ASSERT_EQ(::shmdt(at), 0);
  if (attach_segment(at, 0) != at) GTEST_SKIP() << "another mapping took " << at << " between detach and attach; rerun";
  expect_fresh_registration(*cache, at, old_key, fill(at, 16 * kPage, 2));
  ::shmdt(at);
}

// shmat(SHM_REMAP) over a cached anonymous range replaces it (no uffd event either).
TEST_P(RcacheReuseTest, ShmatRemapOverACachedRangeInvalidates) {
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  std::uint64_t old_key = 0;
  void* pages = cached_fresh_pages(*cache, old_key);
  ASSERT_TRUE(pages != nullptr && old_key != 0);
  ASSERT_EQ(attach_segment(pages, SHM_REMAP), pages) << std::strerror(errno);
  expect_fresh_registration(*cache, pages, old_key, fill(pages, 16 * kPage, 2));
  ::shmdt(pages);
}

INSTANTIATE_TEST_SUITE_P(Monitors, RcacheReuseTest,
                         ::testing::Values(Unmap::interposed_call, Unmap::raw_syscall_seen_by_uffd),
                         [](const auto& param_info) {
                           return param_info.param == Unmap::interposed_call ? "interpose" : "uffd";
                         });

}  // namespace
}  // namespace tether
