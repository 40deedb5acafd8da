// tether-bench-rcache: this registration cache, UCX's ucs_rcache and registering on every
// use, side by side with the same mlock registrar and the same access patterns.
//   tether-bench-rcache --benchmark_format=json
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "pool/mlock_registrar.hpp"
#include "pool/rcache/monitor.hpp"
#include "tether/rcache.hpp"

#ifdef TETHER_BENCH_UCX
extern "C" {
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
}
#endif

namespace {

constexpr std::size_t kPage = 4096;
// 256 KiB of indices: a 4 MiB list (1 << 20) streamed through L2 and evicted the entries,
// which two threads then fetched from each other's caches (the two-thread hit ran 1.23-1.75x
// one thread in 5 of 13 processes while unshared caches ran 1.94-2.05x in the same process).
constexpr std::size_t kAccesses = std::size_t{1} << 16;

// Page-sized regions in one mapping, and a random order to visit them in.
struct Regions {
  explicit Regions(std::size_t regions) : count(regions), order(kAccesses) {
    base = static_cast<char*>(::mmap(nullptr, count * kPage, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    std::uint64_t state = 88172645463325252ULL;
    for (auto& index : order) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      index = static_cast<std::uint32_t>(state % count);
    }
  }
  char* region(std::size_t access) const { return base + std::size_t{order[access & (kAccesses - 1)]} * kPage; }
  std::size_t count;
  char* base;
  std::vector<std::uint32_t> order;
};

// --- the three contenders, one interface: acquire returns a token, release takes it ---

struct TetherCache {
  explicit TetherCache(std::size_t max_count) {
    static tether::Registrar* registrars[] = {&tether::pool::mlock_registrar()};
    tether::RcacheOptions options;
    options.max_count = max_count;
    options.max_bytes = std::size_t{16} << 30;
    options.non_nesting = {true};
    cache = std::move(*tether::RegistrationCache::create(registrars, options));
  }
  tether::RcacheHandle acquire(void* address, std::size_t length) { return std::move(*cache->acquire(address, length)); }
  static void release(tether::RcacheHandle& handle) { handle.release(); }
  std::unique_ptr<tether::RegistrationCache> cache;
};

struct EveryUse {
  explicit EveryUse(std::size_t) {}
  tether::Registration acquire(void* address, std::size_t length) {
    auto start = reinterpret_cast<std::uintptr_t>(address) & ~(kPage - 1);
    auto end = (reinterpret_cast<std::uintptr_t>(address) + length + kPage - 1) & ~(kPage - 1);
    return *tether::pool::mlock_registrar().register_range(reinterpret_cast<void*>(start), end - start,
                                                           tether::Access::all);
  }
  static void release(tether::Registration& registration) { tether::pool::mlock_registrar().deregister(registration); }
};

#ifdef TETHER_BENCH_UCX
ucs_status_t ucx_register(void*, ucs_rcache_t*, void*, ucs_rcache_region_t* region, uint16_t) {
  auto length = region->super.end - region->super.start;
  return ::syscall(SYS_mlock, region->super.start, length) == 0 ? UCS_OK : UCS_ERR_NO_MEMORY;
}
void ucx_deregister(void*, ucs_rcache_t*, ucs_rcache_region_t* region) {
  ::syscall(SYS_munlock, region->super.start, region->super.end - region->super.start);
}
void ucx_dump(void*, ucs_rcache_t*, ucs_rcache_region_t*, char* buffer, size_t max) {
  if (max > 0) buffer[0] = '\0';
}
const ucs_rcache_ops_t kUcxOps = {ucx_register, ucx_deregister, ucx_dump};

struct UcxCache {
  explicit UcxCache(std::size_t max_count) {
    ucs_rcache_params_t params{};
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    params.alignment = kPage;
    params.max_alignment = kPage;
    params.ucm_events = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops = &kUcxOps;
    params.max_regions = max_count;
    params.max_size = std::size_t{16} << 30;
    params.max_unreleased = SIZE_MAX;
    if (ucs_rcache_create(&params, "bench", nullptr, &cache) != UCS_OK) std::abort();
  }
  ~UcxCache() { ucs_rcache_destroy(cache); }
  ucs_rcache_region_t* acquire(void* address, std::size_t length) {
    ucs_rcache_region_t* region = nullptr;
    if (ucs_rcache_get(cache, address, length, PROT_READ | PROT_WRITE, nullptr, &region) != UCS_OK) std::abort();
    return region;
  }
  void release(ucs_rcache_region_t*& region) { ucs_rcache_region_put(cache, region); }
  ucs_rcache_t* cache = nullptr;
};
#endif

template <class Cache>
void release(Cache& cache, auto& token) {
  if constexpr (requires { Cache::release(token); }) {
    Cache::release(token);
  } else {
    cache.release(token);
  }
}

// One cache and one set of regions per (contender, region count), kept across runs.
template <class Cache>
struct Fixture {
  static Fixture& get(std::size_t regions) {
    static std::mutex making;  // the two-thread workloads ask from both threads at once
    std::lock_guard guard(making);
    static std::map<std::size_t, std::unique_ptr<Fixture>> made;
    auto& slot = made[regions];
    if (!slot) slot.reset(new Fixture(regions));
    return *slot;
  }
  explicit Fixture(std::size_t count) : regions(count), cache(2 * count + 16) {
    for (std::size_t i = 0; i < count; ++i) {
      auto token = cache.acquire(regions.base + i * kPage, kPage);
      release(cache, token);
    }
  }
  Regions regions;
  Cache cache;
};

// With several threads, each runs on a CPU of its own for the workload (the scheduler
// sometimes left both on one CPU for a whole short run), and gets its old mask back.
class OwnCpu {
 public:
  explicit OwnCpu(const benchmark::State& state) {
    if (state.threads() < 2 || ::pthread_getaffinity_np(::pthread_self(), sizeof saved_, &saved_) != 0) return;
    int cpus = CPU_COUNT(&saved_);
    int wanted = state.thread_index() % (cpus > 0 ? cpus : 1);
    cpu_set_t own;
    CPU_ZERO(&own);
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &saved_)) continue;
      if (seen++ == wanted) CPU_SET(cpu, &own);
    }
    pinned_ = ::pthread_setaffinity_np(::pthread_self(), sizeof own, &own) == 0;
  }
  ~OwnCpu() {
    if (pinned_) ::pthread_setaffinity_np(::pthread_self(), sizeof saved_, &saved_);
  }
  OwnCpu(const OwnCpu&) = delete;
  OwnCpu& operator=(const OwnCpu&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

template <class Cache>
void hit(benchmark::State& state) {
  auto& fixture = Fixture<Cache>::get(static_cast<std::size_t>(state.range(0)));
  OwnCpu own_cpu(state);
  std::size_t access = static_cast<std::size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    auto token = fixture.cache.acquire(fixture.regions.region(access++), kPage);
    benchmark::DoNotOptimize(token);
    release(fixture.cache, token);
  }
  state.SetItemsProcessed(state.iterations());
}

// The reference for the two-thread hit: each thread hits a cache and regions of its own,
// so nothing is shared; its speed-up is what this machine gives the same code at that
// moment (a host that runs both vCPUs on one core shows here too).
template <class Cache>
void hit_unshared(benchmark::State& state) {
  auto& fixture = Fixture<Cache>::get(static_cast<std::size_t>(state.range(0)) + static_cast<std::size_t>(state.thread_index()));
  OwnCpu own_cpu(state);
  for (std::size_t access = 0; auto _ : state) {
    auto token = fixture.cache.acquire(fixture.regions.region(access++), kPage);
    benchmark::DoNotOptimize(token);
    release(fixture.cache, token);
  }
  state.SetItemsProcessed(state.iterations());
}

// Every access misses: 4096 pages visited in turn through a cache limited to 1024 entries.
template <class Cache>
void miss(benchmark::State& state) {
  static Regions regions(4096);
  static Cache cache(1024);
  std::size_t page = 0;
  for (auto _ : state) {
    auto token = cache.acquire(regions.base + (page++ % 4096) * kPage, kPage);
    benchmark::DoNotOptimize(token);
    release(cache, token);
  }
  state.SetItemsProcessed(state.iterations());
}

// malloc, acquire, release, free: 256 KiB blocks are mmapped, so every free unmaps.
template <class Cache>
void churn(benchmark::State& state) {
  static Cache cache(1024);
  auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* block = std::malloc(size);
    static_cast<char*>(block)[0] = 1;
    auto token = cache.acquire(block, size);
    benchmark::DoNotOptimize(token);
    release(cache, token);
    std::free(block);
  }
  state.SetItemsProcessed(state.iterations());
}

// What the monitors cost an unmapping call: mmap + touch + munmap of 64 KiB, through the
// raw system call (no hook), through the interposed munmap (the hook walks the caches'
// page tables), and on a range watched by userfaultfd (the caller waits for the reader).
enum class Unmapping { raw, interposed, uffd_watched };

template <Unmapping kWay>
void unmap_cost(benchmark::State& state) {
  constexpr std::size_t kBytes = 64 * 1024;
  for (auto _ : state) {
    void* memory = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static_cast<char*>(memory)[0] = 1;
    auto start = reinterpret_cast<std::uintptr_t>(memory);
    if constexpr (kWay == Unmapping::uffd_watched) tether::rcache::uffd_watch(start, start + kBytes);
    if constexpr (kWay == Unmapping::interposed) {
      ::munmap(memory, kBytes);
    } else {
      ::syscall(SYS_munmap, memory, kBytes);
    }
    if constexpr (kWay == Unmapping::uffd_watched) {  // the watch's count, as an entry's release does
      state.PauseTiming();
      tether::rcache::WatchCounts::Range watched{start, start + kBytes};
      tether::rcache::uffd_unwatch({&watched, 1});
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(unmap_cost<Unmapping::raw>)->Name("unmap_raw_syscall");
BENCHMARK(unmap_cost<Unmapping::interposed>)->Name("unmap_interposed_hook");
BENCHMARK(unmap_cost<Unmapping::uffd_watched>)->Name("unmap_uffd_watched");

void hit_tether(benchmark::State& state) { hit<TetherCache>(state); }
void miss_tether(benchmark::State& state) { miss<TetherCache>(state); }
void churn_tether(benchmark::State& state) { churn<TetherCache>(state); }
void hit_unshared_tether(benchmark::State& state) { hit_unshared<TetherCache>(state); }
void hit_every_use(benchmark::State& state) { hit<EveryUse>(state); }
void miss_every_use(benchmark::State& state) { miss<EveryUse>(state); }
void churn_every_use(benchmark::State& state) { churn<EveryUse>(state); }
#ifdef TETHER_BENCH_UCX
void hit_ucx(benchmark::State& state) { hit<UcxCache>(state); }
void miss_ucx(benchmark::State& state) { miss<UcxCache>(state); }
void churn_ucx(benchmark::State& state) { churn<UcxCache>(state); }
#endif

#define TETHER_RCACHE_BENCHES(suffix)                                                              \
  BENCHMARK(hit_##suffix)->Arg(1)->Arg(1000)->Arg(100000);                                         \
  BENCHMARK(hit_##suffix)->Name("hit_two_threads_" #suffix)->Arg(1000)->Threads(1)->Threads(2)->UseRealTime(); \
  BENCHMARK(miss_##suffix);                                                                        \
  BENCHMARK(churn_##suffix)->Arg(256 << 10);

TETHER_RCACHE_BENCHES(tether)
#ifdef TETHER_BENCH_UCX
TETHER_RCACHE_BENCHES(ucx)
#endif
BENCHMARK(hit_unshared_tether)->Name("hit_two_threads_unshared_tether")->Arg(1000)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(hit_every_use)->Arg(1);
BENCHMARK(miss_every_use);
BENCHMARK(churn_every_use)->Arg(256 << 10);

}  // namespace

int main(int argc, char** argv) {
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // fixed, so 256 KiB blocks stay mmapped
  tether::rcache::interpose_enable(true);
  if (auto started = tether::rcache::uffd_start(); !started) std::fprintf(stderr, "%s\n", started.error().message().c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
