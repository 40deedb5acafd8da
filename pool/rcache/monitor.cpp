// The memory monitor's fan-out: caches attach; every unmapped range reaches each of them.
// Called from memory hooks on any thread, so it allocates nothing and takes no lock.
#include <pthread.h>

#include <atomic>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"

namespace tether::rcache {
namespace {

constexpr int kMaxCaches = 16;
std::atomic<Cache*> g_caches[kMaxCaches];
std::atomic<int> g_attached{0};
std::atomic<int> g_notifying{0};  // hooks inside monitor_notify now
std::atomic<std::uint64_t> g_events{0};

Cache* g_forking[kMaxCaches];  // the caches prepare_fork locked (fork is serialised)

void prepare_fork() {
  for (int i = 0; i < kMaxCaches; ++i) {
    g_forking[i] = g_caches[i].load();
    if (g_forking[i] != nullptr) g_forking[i]->prepare_fork();
  }
  uffd_watches_lock_for_fork();  // after the caches' locks, as a cache's release takes them
}
void after_fork_in_parent() {
  uffd_watches_unlock_after_fork();
  for (Cache* cache : g_forking) {
    if (cache != nullptr) cache->after_fork_in_parent();
  }
}
void after_fork_in_child() {
  uffd_watches_unlock_after_fork();
  for (Cache* cache : g_forking) {
    if (cache != nullptr) cache->after_fork_in_child();
  }
}
const bool g_fork_handlers = ::pthread_atfork(prepare_fork, after_fork_in_parent, after_fork_in_child) == 0;

}  // namespace

void monitor_attach(Cache* cache) noexcept {
  for (auto& slot : g_caches) {
    Cache* empty = nullptr;
    if (slot.compare_exchange_strong(empty, cache)) {
      g_attached.fetch_add(1, std::memory_order_release);
      return;
    }
  }
}

void monitor_detach(Cache* cache) noexcept {
  for (auto& slot : g_caches) {
    Cache* mine = cache;
    if (slot.compare_exchange_strong(mine, nullptr)) g_attached.fetch_sub(1, std::memory_order_release);
  }
  // A hook may have loaded the pointer before it was cleared: wait for it to finish.
  while (g_notifying.load() != 0) {
  }
}

void monitor_notify(const void* address, std::size_t length) noexcept {
  if (g_attached.load(std::memory_order_acquire) == 0 || length == 0) return;
  auto start = reinterpret_cast<std::uintptr_t>(address);
  if (length > UINTPTR_MAX - start) length = UINTPTR_MAX - start;
  g_events.fetch_add(1, std::memory_order_relaxed);
  g_notifying.fetch_add(1);  // seq_cst: ordered against detach's clearing store
  for (auto& slot : g_caches) {
    if (Cache* cache = slot.load()) cache->invalidate(start, start + length);
  }
  g_notifying.fetch_sub(1, std::memory_order_acq_rel);
}

std::uint64_t monitor_events() noexcept { return g_events.load(std::memory_order_relaxed); }

}  // namespace tether::rcache
