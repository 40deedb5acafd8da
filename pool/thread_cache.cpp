#include "pool/thread_cache.hpp"

namespace tether::pool {
namespace {

thread_local bool t_exiting = false;

// Returns this thread's caches to their pools when the thread ends.
struct ThreadExit {
  bool armed = false;
  ~ThreadExit() {
    t_exiting = true;
    t_recent_span = {};
    t_global_pool_cache = &g_no_thread_cache;
    for (ThreadCache*& cache : t_thread_caches) {
      if (cache == nullptr) continue;
      cache->pool->retire_thread_cache(cache);
      cache = nullptr;
    }
  }
};
thread_local ThreadExit t_exit;

}  // namespace

ThreadCache* create_thread_cache(SlabPool* pool, int pool_id) noexcept {
  // A forked child makes no cache of its parent's pools (their caches_mutex_ may be held for
  // ever), so no recent span of theirs is remembered either; release() ignores their frees.
  if (t_exiting || inherited_by_fork(pool_id)) return nullptr;
  t_exit.armed = true;  // constructs the thread's exit hook
  auto* cache = new (std::nothrow) ThreadCache(pool);
  if (cache != nullptr) pool->adopt_thread_cache(cache);
  t_thread_caches[pool_id] = cache;
  return cache;
}

}  // namespace tether::pool
