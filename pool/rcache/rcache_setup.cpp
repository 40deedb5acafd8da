// Options from the configuration table, machine-derived limits, the process-wide cache.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <mutex>

#include "pool/memlock.hpp"
#include "pool/mlock_registrar.hpp"
#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"
#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether {
namespace {

std::size_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : std::size_t{1} << 30;
}

std::size_t max_map_count() {
  std::FILE* file = std::fopen("/proc/sys/vm/max_map_count", "re");
  unsigned long value = 65530;
  if (file != nullptr) {
    if (std::fscanf(file, "%lu", &value) != 1) value = 65530;
    std::fclose(file);
  }
  return value;
}

// A quarter of RAM, and no more than RLIMIT_MEMLOCK lets this process pin.
std::size_t default_max_bytes() {
  std::size_t bytes = physical_memory_bytes() / 4;
  pool::MemlockLimit limit = pool::read_memlock_limit();
  if (!limit.unlimited()) bytes = std::min<std::size_t>(bytes, limit.soft_bytes);
  return std::max<std::size_t>(bytes, std::size_t{1} << 20);
}

// Each registration can split a mapping in up to three: keep well under vm.max_map_count.
std::size_t default_max_count() { return std::max<std::size_t>(max_map_count() / 4, 256); }

}  // namespace

RcacheOptions RcacheOptions::from_config() {
  const auto& config = config::Config::global();
  RcacheOptions options;
  options.max_count = config.size_bytes("TETHER_RCACHE_MAX_COUNT");
  if (options.max_count == 0) options.max_count = default_max_count();
  options.max_bytes = config.size_bytes("TETHER_RCACHE_MAX_BYTES");
  if (options.max_bytes == 0) options.max_bytes = default_max_bytes();
  options.chunk_bytes = config.size_bytes("TETHER_RCACHE_CHUNK");
  options.leave_pinned = config.flag("TETHER_RCACHE_LEAVE_PINNED");
  options.over_limit = config.choice("TETHER_RCACHE_OVER_LIMIT") == "fail" ? RcacheOverLimit::fail
                                                                            : RcacheOverLimit::register_uncached;
  return options;
}

namespace rcache {

void malloc_keep_enable() noexcept {
  ::mallopt(M_TRIM_THRESHOLD, -1);  // never give the top of the heap back
  ::mallopt(M_MMAP_MAX, 0);         // never serve a block with its own mapping
}

}  // namespace rcache

namespace {

Expected<void> start_monitor() {
  const auto& config = config::Config::global();
  if (config.flag("TETHER_MALLOC_KEEP")) rcache::malloc_keep_enable();
  std::string_view kind = config.choice("TETHER_RCACHE_MONITOR");
  if (kind == "none") {
    log::warn("rcache",
              "TETHER_RCACHE_MONITOR=none: registrations of freed memory are not noticed; use it only "
              "with TETHER_MALLOC_KEEP=on and memory that is never unmapped");
    return {};
  }
  rcache::interpose_enable(true);  // also backs uffd for file-backed ranges it cannot watch
  if (kind == "interpose") return {};
  auto started = rcache::uffd_start();
  if (!started && kind == "uffd") return started;
  if (!started) log::info("rcache", "userfaultfd monitor unavailable, using interposition only: {}", started.error().message());
  return {};
}

}  // namespace

Expected<void> rcache_start_monitor() {
  static std::once_flag once;
  static Expected<void> started;
  std::call_once(once, [] { started = start_monitor(); });
  return started;
}

Expected<RegistrationCache*> rcache_global() {
  static std::once_flag once;
  static RegistrationCache* cache = nullptr;
  static Error failure;
  std::call_once(once, [] {
    if (auto monitor = rcache_start_monitor(); !monitor) {
      failure = monitor.error();
      return;
    }
    static Registrar* registrars[] = {&pool::mlock_registrar()};
    RcacheOptions options = RcacheOptions::from_config();
    options.non_nesting = {true};
    auto created = RegistrationCache::create(registrars, std::move(options));
    if (!created) {
      failure = created.error();
      return;
    }
    cache = created->release();  // lives as long as the process: handles may outlive main()
  });
  if (cache == nullptr) return tl::unexpected(failure);
  return cache;
}

}  // namespace tether
