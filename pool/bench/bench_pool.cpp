// tether-bench-pool: alloc+free pairs from the pinned pool against glibc malloc,
// mimalloc, and per-buffer mmap+mlock (what a code without a pool does).
// Run: tether-bench-pool --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <sys/mman.h>

#include <cstdlib>

#include <benchmark/benchmark.h>

#ifdef TETHER_BENCH_MIMALLOC
#include <mimalloc.h>
#endif

#include "tether/pool.hpp"

namespace {

void set_bytes_label(benchmark::State& state) {
  state.SetLabel(std::to_string(state.range(0)) + " B");
}

void pool_alloc_free(benchmark::State& state) {
  auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* buffer = tether::pinned_alloc(size);
    benchmark::DoNotOptimize(buffer);
    tether::pinned_free(buffer);
  }
  set_bytes_label(state);
}

void malloc_free(benchmark::State& state) {
  auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* buffer = std::malloc(size);
    benchmark::DoNotOptimize(buffer);
    std::free(buffer);
  }
  set_bytes_label(state);
}

#ifdef TETHER_BENCH_MIMALLOC
void mimalloc_free(benchmark::State& state) {
  auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* buffer = mi_malloc(size);
    benchmark::DoNotOptimize(buffer);
    mi_free(buffer);
  }
  set_bytes_label(state);
}
#endif

void mmap_mlock_per_buffer(benchmark::State& state) {
  auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* buffer = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED || ::mlock(buffer, size) != 0) {
      state.SkipWithError("mmap+mlock failed (raise ulimit -l)");
      break;
    }
    benchmark::DoNotOptimize(buffer);
    ::munlock(buffer, size);
    ::munmap(buffer, size);
  }
  set_bytes_label(state);
}

void sizes(benchmark::internal::Benchmark* bench) {
  for (long size : {64L, 4096L, 65536L, 1048576L}) bench->Arg(size);
}

BENCHMARK(pool_alloc_free)->Apply(sizes)->Threads(1)->Threads(2);
BENCHMARK(malloc_free)->Apply(sizes)->Threads(1)->Threads(2);
#ifdef TETHER_BENCH_MIMALLOC
BENCHMARK(mimalloc_free)->Apply(sizes)->Threads(1)->Threads(2);
#endif
BENCHMARK(mmap_mlock_per_buffer)->Apply(sizes);

}  // namespace

int main(int argc, char** argv) {
  if (tether::pinned_alloc(1) == nullptr) return 1;  // start the pool before timing
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
