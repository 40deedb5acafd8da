// fork() and system() with live registrations, shutdown with handles held, and the
// never-shrinking heap (TETHER_MALLOC_KEEP).
#include <malloc.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "pool/rcache/monitor.hpp"
#include "tests/rcache/rcache_test_support.hpp"

namespace tether {
namespace {

using namespace testing;

TEST(RcacheProcess, ForkAndSystemWithLiveRegistrations) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* mapped = map_pages(16);
  void* heap = std::malloc(48 * 1024);
  ASSERT_TRUE(mapped != nullptr && heap != nullptr);
  std::uint64_t mapped_sum = fill(mapped, 16 * kPage, 1);
  std::uint64_t heap_sum = fill(heap, 48 * 1024, 2);
  auto first = cache->acquire(mapped, 16 * kPage);
  auto second = cache->acquire(heap, 48 * 1024);
  ASSERT_TRUE(first && second);
  int status = run_with_watchdog([] {
    std::vector<char*> blocks;  // the child allocates, frees and writes normally
    for (int i = 0; i < 1000; ++i) blocks.push_back(static_cast<char*>(std::malloc(static_cast<std::size_t>(i) * 37 + 1)));
    for (char* block : blocks) {
      block[0] = 'x';
      std::free(block);
    }
    return std::system("exit 3") == -1 ? 1 : 0;
  });
  EXPECT_EQ(status, 0);
  int shell = std::system("exit 3");
  ASSERT_TRUE(WIFEXITED(shell));
  EXPECT_EQ(WEXITSTATUS(shell), 3);
  EXPECT_EQ(checksum_through(*first, mapped, 16 * kPage), mapped_sum);
  EXPECT_EQ(checksum_through(*second, heap, 48 * 1024), heap_sum);
  EXPECT_EQ(cache->stats().invalidations, 0u);
  first->release();
  second->release();
  std::free(heap);
  ::munmap(mapped, 16 * kPage);
}

// An entry a memory hook invalidated is only queued for deregistration, its pages still
// DONTFORK; fork() must give the child those pages all the same (they are still mapped).
TEST(RcacheProcess, AnEntryInvalidatedByAHookIsForkedWithItsPages) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  auto* mapped = static_cast<unsigned char*>(map_pages(16));
  ASSERT_NE(mapped, nullptr);
  fill(mapped, 16 * kPage, 4);
  { ASSERT_TRUE(cache->acquire(mapped, 16 * kPage)); }
  (void)::madvise(mapped, 16 * kPage, MADV_DONTNEED);  // refused on locked pages; the hook invalidates
  ASSERT_EQ(cache->stats().invalidations, 1u);
  int status = run_with_watchdog([mapped] {
    volatile unsigned char last = mapped[16 * kPage - 1];  // SIGSEGV where the page is not in the child
    (void)last;
    return 0;
  });
  EXPECT_EQ(status, 0) << "the child could not read pages the cache had invalidated (139: SIGSEGV)";
  ::munmap(mapped, 16 * kPage);
}

TEST(RcacheProcess, ShutdownWithHandlesHeldIsReported) {
  rcache::interpose_enable(true);
  CountingMlockRegistrar registrar;
  auto cache = make_cache(registrar);
  void* mapped = map_pages(4);
  auto handle = cache->acquire(mapped, 4 * kPage);
  ASSERT_TRUE(handle);
  ::testing::internal::CaptureStderr();
  cache.reset();
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("handles still hold 1 entries"), std::string::npos) << said;
  handle->release();  // after the cache is gone: safe, the registration stays coherent
  EXPECT_EQ(registrar.deregistrations, 0u);
  EXPECT_EQ(locked_kb(mapped), 16);
  (void)::madvise(mapped, 4 * kPage, MADV_DONTNEED);  // the abandoned cache still hears of it: the entry is queued
  int status = run_with_watchdog([mapped] {  // fork() drains what caches queued
    volatile unsigned char last = static_cast<unsigned char*>(mapped)[4 * kPage - 1];
    (void)last;
    return 0;
  });
  EXPECT_EQ(status, 0) << "the child could not read the entry's pages (139: SIGSEGV)";
  EXPECT_EQ(registrar.deregistrations, 0u) << "the abandoned cache deregistered (its registrars may be gone)";
  ::munmap(mapped, 4 * kPage);
}

TEST(RcacheProcess, MallocKeepMeansNoInvalidationsAndNoReregistration) {
#if defined(TETHER_SANITIZE_THREAD) || defined(TETHER_SANITIZE_ADDRESS)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc malloc: mallopt has no effect";
#endif
  int status = run_with_watchdog([] {
    rcache::malloc_keep_enable();
    rcache::interpose_enable(true);
    if (!rcache::uffd_start()) return 10;
    CountingMlockRegistrar registrar;
    auto cache = make_cache(registrar);
    std::uint64_t events = rcache::monitor_events();
    for (int i = 0; i < 2000; ++i) {
      std::size_t size = (std::size_t{256} << 10) + static_cast<std::size_t>(i % 7) * 4096;
      void* block = std::malloc(size);
      if (block == nullptr) return 11;
      auto handle = cache->acquire(block, size);
      if (!handle) return 12;
      static_cast<char*>(block)[size - 1] = 1;
      handle->release();
      std::free(block);
    }
    RcacheStats stats = cache->stats();
    if (stats.invalidations != 0) return 13;
    if (rcache::monitor_events() != events) return 14;
    if (stats.registrations > 8) return 15;  // the first block and its few growths
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(RcacheProcess, WithoutMallocKeepTheSameChurnIsInvalidated) {
#if defined(TETHER_SANITIZE_THREAD) || defined(TETHER_SANITIZE_ADDRESS)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc malloc: free() does not unmap";
#endif
  int status = run_with_watchdog([] {
    rcache::interpose_enable(true);
    if (!rcache::uffd_start()) return 10;
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // fixed: glibc would otherwise raise it after a free
    CountingMlockRegistrar registrar;
    auto cache = make_cache(registrar);
    for (int i = 0; i < 50; ++i) {
      void* block = std::malloc(std::size_t{4} << 20);  // mmapped by glibc: no free heap chunk is this big
      auto handle = cache->acquire(block, std::size_t{4} << 20);
      if (!handle) return 12;
      handle->release();
      std::free(block);
    }
    return cache->stats().invalidations >= 50 ? 0 : 13;
  });
  EXPECT_EQ(status, 0);
}

// An idle entry stays locked and watched; growing its block by moving it (what realloc()
// of a large block does) must return. Registered for missing-page faults, the kernel
// faulted the moved locked pages in while the move was under way, the reader's
// UFFDIO_ZEROPAGE answered EAGAIN each time, and mremap never returned.
TEST(RcacheProcess, GrowingACachedBlockByMovingItReturns) {
  int status = run_with_watchdog(
      [] {
        rcache::interpose_enable(true);
        if (!rcache::uffd_start()) return 10;
        CountingMlockRegistrar registrar;
        auto cache = make_cache(registrar);
        void* pages = map_pages(16);  // the rest of its 2 MiB window stays mapped: growth must move
        if (pages == nullptr) return 11;
        std::uint64_t sum = fill(pages, 16 * kPage, 9);
        {
          auto handle = cache->acquire(pages, 16 * kPage);
          if (!handle) return 12;
        }
        void* grown = ::mremap(pages, 16 * kPage, 64 * kPage, MREMAP_MAYMOVE);
        if (grown == MAP_FAILED) return 13;
        if (grown == pages) return 16;  // grown in place: this test needs a move
        if (checksum(grown, 16 * kPage) != sum) return 14;
        if (cache->stats().invalidations == 0) return 15;
        ::munmap(grown, 64 * kPage);
        return 0;
      },
      10);
  EXPECT_EQ(status, 0) << "142: the watchdog ended a hung mremap";
}

}  // namespace
}  // namespace tether
