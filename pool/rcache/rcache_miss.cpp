// The miss path: register the pages no entry covers, within one chunk, making room
// under the limits first and evicting idle entries when a registrar runs out.
#include <sys/mman.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include <fmt/format.h>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"
#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"

namespace tether::rcache {
namespace {

bool out_of_resources(const Error& error) {
  return error.code == Errc::memlock_limit || error.code == Errc::out_of_memory ||
         error.sys_errno == ENOMEM || error.sys_errno == EAGAIN;
}

bool already_registered(const Error& error) { return error.sys_errno == EEXIST || error.sys_errno == EBUSY; }

// getpid() is a system call (glibc keeps no copy): remember it, and forget it in a child.
std::atomic<pid_t> g_pid{0};
void forget_pid_in_child() { g_pid.store(0, std::memory_order_relaxed); }
const bool g_pid_fork_handler = ::pthread_atfork(nullptr, nullptr, forget_pid_in_child) == 0;

pid_t own_pid() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = ::getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace

bool pages_readable(std::uintptr_t start, std::uintptr_t end) noexcept {
  constexpr std::size_t kBatch = 512;
  char scratch[kBatch];
  iovec local{scratch, 0};
  iovec remote[kBatch];
  for (std::uintptr_t page = start; page < end;) {
    std::size_t count = 0;
    for (; count < kBatch && page < end; ++count, page += kPageBytes)
      remote[count] = iovec{reinterpret_cast<void*>(page), 1};
    local.iov_len = count;
    ssize_t copied = ::process_vm_readv(own_pid(), &local, 1, remote, count, 0);
    if (copied != static_cast<ssize_t>(count)) return false;
  }
  return true;
}

Expected<Entry*> Cache::take_or_register(std::uintptr_t address, std::uintptr_t end, Access access,
                                         std::uintptr_t request_start, std::uintptr_t request_end) {
  std::lock_guard guard(miss_mutex_);
  MissPath holding;
  drain_retired();
  if (Entry* entry = take_hit(address, access)) return entry;  // registered meanwhile
  misses_.fetch_add(1, std::memory_order_relaxed);
  auto entry = register_entry(address, gap_end(address, end), access);
  if (!entry) return entry;
  exclude_from_fork(**entry, request_start, request_end);
  retire_covered_by(**entry);
  return entry;
}

// An entry registered where an older one starts (which lacked the access asked for) took
// every page slot of an older one it covers wholly: no hit and no invalidation could find
// that one again. It goes now (deregistered when its last handle lets go).
void Cache::retire_covered_by(const Entry& entry) noexcept {
  if ((entry.state.load(std::memory_order_relaxed) & kInvalid) != 0) return;  // uncached: never published
  bool claimed = false;
  auto [first, last] = registered_.equal_range(entry.start);
  for (auto it = first; it != last; ++it) {
    Entry* older = it->second;
    if (older == &entry || older->end > entry.end) continue;
    if ((older->state.load(std::memory_order_relaxed) & (kInvalid | kDead)) != 0) continue;
    if (mark_invalid(older, ref_slot()).claimed) {
      push_retired(older);
      claimed = true;
    }
  }
  if (claimed) drain_retired();
}

// DONTFORK on the pages wholly inside the caller's buffer: a page it shares with other
// heap blocks (malloc's headers) stays in the child, so a forked child's malloc works.
void Cache::exclude_from_fork(Entry& entry, std::uintptr_t request_start, std::uintptr_t request_end) {
  entry.fork_shared = 0;
  if (entry.start < ((request_start + kPageBytes - 1) & ~(kPageBytes - 1))) entry.fork_shared |= kSharedHead;
  if (entry.end > (request_end & ~(kPageBytes - 1))) entry.fork_shared |= kSharedTail;
  Interval range = dontfork_range(entry);
  if (range.start < range.end) ::madvise(reinterpret_cast<void*>(range.start), range.end - range.start, MADV_DONTFORK);
}

Interval Cache::dontfork_range(const Entry& entry) noexcept {
  std::uintptr_t start = entry.start + ((entry.fork_shared & kSharedHead) != 0 ? kPageBytes : 0);
  std::uintptr_t end = entry.end - ((entry.fork_shared & kSharedTail) != 0 ? kPageBytes : 0);
  return start < end ? Interval{start, end} : Interval{0, 0};
}

// The end of the piece starting at `address`: the request's end, the chunk's end, or
// the start of the next registered entry, whichever comes first.
std::uintptr_t Cache::gap_end(std::uintptr_t address, std::uintptr_t end) const noexcept {
  std::uintptr_t chunk_end = (address | (options_.chunk_bytes - 1)) + 1;
  std::uintptr_t limit = std::min(end, chunk_end);
  for (auto it = registered_.upper_bound(address); it != registered_.end() && it->first < limit; ++it) {
    if ((it->second->state.load(std::memory_order_relaxed) & (kInvalid | kDead)) == 0) return it->first;
  }
  return limit;
}

Expected<Entry*> Cache::register_entry(std::uintptr_t start, std::uintptr_t end, Access access) {
  if (!pages_readable(start, end))
    return make_error(Errc::invalid_argument,
                      fmt::format("the range {:#x}-{:#x} holds a page that is not mapped or not readable "
                                  "(PROT_NONE, a hole, or past the end of a mapping)",
                                  start, end),
                      "register only memory the process can read; check the buffer's length");
  Entry* entry = new_entry(start, end, access);
  bool uncached = false;
  if (auto room = make_room(entry->length()); !room) {
    if (options_.over_limit == RcacheOverLimit::fail) {
      spare_entries_.push_back(entry);
      return tl::unexpected(room.error());
    }
    uncached = true;
  }
  if (auto done = register_with_all(*entry); !done) {
    spare_entries_.push_back(entry);
    return tl::unexpected(done.error());
  }
  registrations_.fetch_add(1, std::memory_order_relaxed);
  registered_bytes_.fetch_add(entry->length(), std::memory_order_relaxed);
  entry->watch_counted = uffd_watch(start, end);  // after pinning: no missing-page faults to serve
  registered_.emplace(start, entry);
  ++held_count_;
  held_bytes_ += entry->length();
  stat_entries_.store(held_count_, std::memory_order_relaxed);
  stat_bytes_.store(held_bytes_, std::memory_order_relaxed);
  clock_.fetch_add(1, std::memory_order_relaxed);
  add_ref(*entry, kTake);  // the caller's reference
  std::uint64_t next_generation = ((entry->state.load() & kGeneration) + 1) & kGeneration;
  if (uncached) {
    uncached_.fetch_add(1, std::memory_order_relaxed);
    entry->state.store(next_generation | kInvalid);  // dies at its release
  } else {
    entry->state.store(next_generation);  // claimable now
    publish(entry);
  }
  return entry;
}

// Evicts idle entries until one more entry of `bytes` fits under both limits.
Expected<void> Cache::make_room(std::size_t bytes) {
  bool count_full = held_count_ + 1 > options_.max_count;
  bool bytes_full = held_bytes_ + bytes > options_.max_bytes;
  if (!count_full && !bytes_full) return {};
  std::size_t count_wanted = count_full ? held_count_ + 1 - options_.max_count : 0;
  std::size_t bytes_wanted = bytes_full ? held_bytes_ + bytes - options_.max_bytes : 0;
  evict_idle(count_wanted, bytes_wanted);
  if (held_count_ + 1 <= options_.max_count && held_bytes_ + bytes <= options_.max_bytes) return {};
  bool by_count = held_count_ + 1 > options_.max_count;
  return make_error(Errc::limit_exceeded,
                    by_count ? fmt::format("the registration cache holds {} entries, all in use, and "
                                           "TETHER_RCACHE_MAX_COUNT is {}",
                                           held_count_, options_.max_count)
                             : fmt::format("the registration cache holds {}, all in use, and registering "
                                           "{} more passes TETHER_RCACHE_MAX_BYTES={}",
                                           config::format_size(held_bytes_), config::format_size(bytes),
                                           config::format_size(options_.max_bytes)),
                    by_count ? "release handles sooner, raise TETHER_RCACHE_MAX_COUNT, or set "
                               "TETHER_RCACHE_OVER_LIMIT=uncached"
                             : "release handles sooner, raise TETHER_RCACHE_MAX_BYTES, or set "
                               "TETHER_RCACHE_OVER_LIMIT=uncached");
}

// Registers with every registrar. A registrar out of resources gets idle entries evicted
// and the call retried until it succeeds or nothing is left to evict; one that says the
// range is registered already gets the stale entry at that base evicted, once.
Expected<void> Cache::register_with_all(Entry& entry) {
  auto* address = reinterpret_cast<void*>(entry.start);
  bool recovered = false;
  for (std::size_t slot = 0; slot < registrars_.size();) {
    auto done = registrars_[slot]->register_range(address, entry.length(), entry.access);
    if (done) {
      entry.registrations[slot++] = *done;
      continue;
    }
    bool retry = false;
    if (out_of_resources(done.error())) retry = evict_idle(1, entry.length()) != 0;
    if (!retry && !recovered && already_registered(done.error())) {
      recovered = true;
      retry = recover_already_registered(entry.start);
    }
    if (retry) continue;
    for (std::size_t undo = 0; undo < slot; ++undo) deregister_pages(entry, undo);
    Error error = done.error();
    error.cause = fmt::format("registering {} at {} with '{}' failed and no idle entry is left to evict: {}",
                              config::format_size(entry.length()), address, registrars_[slot]->name(),
                              error.cause);
    error.remedy += "; or lower TETHER_RCACHE_MAX_BYTES so the cache evicts before the limit";
    log::warn("rcache", "{}", error.message());
    return tl::unexpected(std::move(error));
  }
  return {};
}

bool Cache::recover_already_registered(std::uintptr_t start) {
  auto [first, last] = registered_.equal_range(start);
  for (auto it = first; it != last; ++it) {
    Entry* stale = it->second;
    if (!claim_if_idle(stale)) continue;
    remove_from_index(stale);
    evictions_.fetch_add(1, std::memory_order_relaxed);
    Entry* victims[] = {stale};
    destroy(victims);
    return true;
  }
  return false;
}

// Deregisters idle entries, least recently used first, until `count_wanted` entries and
// `bytes_wanted` bytes are gone (or no idle entry is left). Returns how many went.
std::size_t Cache::evict_idle(std::size_t count_wanted, std::size_t bytes_wanted) {
  std::vector<Entry*> idle;
  for (auto& [start, entry] : registered_) {
    if ((entry->state.load(std::memory_order_relaxed) & kFlags) == 0 && total_refs(*entry) == 0) idle.push_back(entry);
  }
  std::sort(idle.begin(), idle.end(), [](const Entry* a, const Entry* b) {
    return a->last_used.load(std::memory_order_relaxed) < b->last_used.load(std::memory_order_relaxed);
  });
  // Evict a little more than asked so that a full cache does not scan on every miss.
  std::size_t slack = idle.size() / 16;
  std::size_t bytes = 0;
  std::vector<Entry*> victims;
  for (Entry* entry : idle) {
    if (victims.size() >= count_wanted + slack && bytes >= bytes_wanted) break;
    if (!claim_if_idle(entry)) continue;  // hit meanwhile
    remove_from_index(entry);
    bytes += entry->length();
    victims.push_back(entry);
  }
  if (!victims.empty()) destroy(victims);
  evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
  return victims.size();
}

// A recycled entry (or a new one), still unclaimable by readers (kDead) until published.
Entry* Cache::new_entry(std::uintptr_t start, std::uintptr_t end, Access access) {
  if (spare_entries_.empty()) {  // a new block of entries, each with its registrations
    std::size_t per_entry = registrars_.size();
    // Every take is kEntryBlockBytes from 2 MiB-aligned chunks, so each block is aligned
    // to its size, as ref_column() assumes.
    static_assert(HugeChunks::kChunkBytes % kEntryBlockBytes == 0);
    auto* block = static_cast<Entry*>(entry_memory_.take(kEntryBlockBytes));
    if (block == nullptr) throw std::bad_alloc();
    auto* refs = reinterpret_cast<RefCount*>(reinterpret_cast<char*>(block) + kEntryRowsBytes);
    for (std::size_t i = 0; i < kRefSlots * kEntriesPerBlock; ++i) new (&refs[i]) RefCount{0};
    registration_blocks_.push_back(std::make_unique<Registration[]>(kEntriesPerBlock * per_entry));
    for (std::size_t i = kEntriesPerBlock; i-- > 0;) {
      Entry* made = new (&block[i]) Entry{};  // trivially destructible: the chunks just go
      made->registrations = &registration_blocks_.back()[i * per_entry];
      spare_entries_.push_back(made);
    }
  }
  Entry* entry = spare_entries_.back();
  spare_entries_.pop_back();
  entry->start = start;
  entry->end = end;
  entry->access = access;
  entry->fork_shared = kSharedHead | kSharedTail;  // nothing DONTFORK until exclude_from_fork
  entry->last_used.store(clock_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  std::fill(entry->registrations, entry->registrations + registrars_.size(), Registration{});
  return entry;
}

// Makes a registered entry findable: every page's slot names it.
void Cache::publish(Entry* entry) {
  CriticalSection inside;
  for (std::uintptr_t page = entry->start; page < entry->end; page += kPageBytes) {
    if (PageTable::Slot* slot = table_.slot(page, true)) slot->store(entry, std::memory_order_release);
  }
}

}  // namespace tether::rcache
