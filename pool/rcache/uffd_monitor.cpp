// The userfaultfd monitor: registered ranges are also registered with a userfaultfd in
// write-protect mode with nothing write-protected (so no fault ever comes to the reader;
// "missing" mode where the kernel refuses that), and a thread reads the kernel's
// non-cooperative events. Unlike the
// interposition hooks it sees glibc's internal munmap (free() of an mmapped block) and
// brk trims. The kernel holds the unmapping thread until its event is read; the reader
// raises `g_busy` before reading and lowers it once the caches are told, and acquire()
// waits while it is raised, so the unmapping thread cannot get a stale hit.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"
#include "pool/rcache/watch_counts.hpp"
#include "runtime/base/log.hpp"

namespace tether::rcache {
namespace {

std::atomic<int> g_fd{-1};
std::atomic<bool> g_busy{false};

constexpr std::uint64_t kFeatures =
    UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;

Expected<int> open_userfaultfd() {
  int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0 && errno == EPERM)  // unprivileged: user-mode faults only is enough here
    fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
  if (fd < 0)
    return make_error(Errc::unsupported, fmt::format("userfaultfd() failed: {} ({})", std::strerror(errno), errno),
                      "run with CAP_SYS_PTRACE, set vm.unprivileged_userfaultfd=1, or use "
                      "TETHER_RCACHE_MONITOR=interpose",
                      errno);
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kFeatures;
  if (::ioctl(fd, UFFDIO_API, &api) != 0) {
    int error = errno;
    ::close(fd);
    return make_error(Errc::unsupported,
                      fmt::format("UFFDIO_API with unmap/remove/remap events failed: {}", std::strerror(error)),
                      "use a kernel of 4.11 or later, or TETHER_RCACHE_MONITOR=interpose", error);
  }
  return fd;
}

void resolve_missing_fault(int fd, const uffd_msg& message) {
  uffdio_zeropage zero{};
  zero.range.start = message.arg.pagefault.address & ~(kPageBytes - 1);
  zero.range.len = kPageBytes;
  if (::ioctl(fd, UFFDIO_ZEROPAGE, &zero) == 0) return;  // wakes the faulting thread
  uffdio_range wake{zero.range.start, kPageBytes};  // EEXIST or failure: wake it to retry
  ::ioctl(fd, UFFDIO_WAKE, &wake);
}

void handle(int fd, const uffd_msg& message) {
  switch (message.event) {
    case UFFD_EVENT_UNMAP:
    case UFFD_EVENT_REMOVE:
      monitor_notify(reinterpret_cast<void*>(message.arg.remove.start),
                     message.arg.remove.end - message.arg.remove.start);
      break;
    case UFFD_EVENT_REMAP:
      monitor_notify(reinterpret_cast<void*>(message.arg.remap.from), message.arg.remap.len);
      break;
    case UFFD_EVENT_PAGEFAULT:
      resolve_missing_fault(fd, message);
      break;
    default:
      break;
  }
}

void* read_events(void*) {
  int fd = g_fd.load();
  uffd_msg messages[16];
  for (;;) {
    pollfd waiting{fd, POLLIN, 0};
    if (::poll(&waiting, 1, -1) < 0 && errno != EINTR) break;
    if ((waiting.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) break;
    g_busy.store(true, std::memory_order_seq_cst);
    ssize_t bytes = ::read(fd, messages, sizeof messages);
    for (ssize_t i = 0; bytes > 0 && i < bytes / static_cast<ssize_t>(sizeof(uffd_msg)); ++i) handle(fd, messages[i]);
    g_busy.store(false, std::memory_order_release);
  }
  return nullptr;
}

// A forked child has neither the reader thread nor the parent's userfaultfd context: it
// starts without the monitor (interposition still works) until uffd_start() runs again.
void forget_in_child() {
  int fd = g_fd.exchange(-1);
  if (fd >= 0) ::close(fd);
  g_busy.store(false);
}

// One lock over the counts and the ioctls they lead to: a count falling to zero and its
// UFFDIO_UNREGISTER must not let another cache's watch of the same pages in between.
std::mutex g_watch_mutex;

// Never destroyed: caches may release entries while the process exits.
WatchCounts& watch_counts() {
  static auto* counts = new WatchCounts;
  return *counts;
}

}  // namespace

// Taken after the caches' own locks, the order a cache's release takes them in.
void uffd_watches_lock_for_fork() noexcept { g_watch_mutex.lock(); }
void uffd_watches_unlock_after_fork() noexcept { g_watch_mutex.unlock(); }

// Counted whether or not the monitor runs yet: an entry registered before uffd_start()
// still holds its pages when a later entry over them is released.
bool uffd_watch(std::uintptr_t start, std::uintptr_t end) noexcept {
  std::lock_guard guard(g_watch_mutex);
  try {
    watch_counts().add(start, end);
  } catch (...) {  // out of memory: not counted, not watched (the hooks still see munmap)
    return false;
  }
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return true;
  uffdio_register range{};
  range.range.start = start;
  range.range.len = end - start;
  // Not "missing" mode where the kernel takes write-protect mode (anonymous memory, Linux
  // 5.7 and later): a locked range moved by mremap (realloc() of a large block) is faulted
  // in while the move is under way, the reader's UFFDIO_ZEROPAGE meets EAGAIN, and the
  // fault comes back for ever.
  range.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(fd, UFFDIO_REGISTER, &range) != 0 && errno == EINVAL) {
    range.mode = UFFDIO_REGISTER_MODE_MISSING;
    ::ioctl(fd, UFFDIO_REGISTER, &range);  // refused for file-backed memory: the hooks see it
  }
  return true;
}

void uffd_unwatch(std::span<const WatchCounts::Range> ranges) noexcept {
  std::lock_guard guard(g_watch_mutex);
  std::vector<WatchCounts::Range> released;
  try {
    released = watch_counts().remove(ranges);
  } catch (...) {  // out of memory: left watched, which costs events, never a stale hit
    return;
  }
  int fd = g_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  for (const WatchCounts::Range& piece : released) {
    uffdio_range range{piece.start, piece.end - piece.start};
    ::ioctl(fd, UFFDIO_UNREGISTER, &range);
  }
}

bool uffd_running() noexcept { return g_fd.load(std::memory_order_relaxed) >= 0; }

// The reader holds its CPU only while it handles one event; past a few hundred spins it
// has likely lost it, maybe to this waiter (2 CPUs): give it back.
void uffd_wait_idle() noexcept {
  constexpr std::uint32_t kSpinsBeforeYield = 256;
  for (std::uint32_t spins = 0; g_busy.load(std::memory_order_acquire); ++spins)
    if (spins >= kSpinsBeforeYield) ::sched_yield();
}

Expected<void> uffd_start() {
  static std::mutex starting;
  std::lock_guard guard(starting);
  if (uffd_running()) return {};
  static bool fork_handler = ::pthread_atfork(nullptr, nullptr, forget_in_child) == 0;
  static_cast<void>(fork_handler);
  auto fd = open_userfaultfd();
  if (!fd) return tl::unexpected(fd.error());
  g_fd.store(*fd);
  pthread_t reader;
  pthread_attr_t attributes;
  ::pthread_attr_init(&attributes);
  ::pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  int error = ::pthread_create(&reader, &attributes, read_events, nullptr);
  ::pthread_attr_destroy(&attributes);
  if (error != 0) {
    g_fd.store(-1);
    ::close(*fd);
    return make_error(Errc::unsupported, fmt::format("starting the userfaultfd reader failed: {}", std::strerror(error)),
                      "raise the thread limit or use TETHER_RCACHE_MONITOR=interpose", error);
  }
  ::pthread_setname_np(reader, "tether-uffd");
  return {};
}

}  // namespace tether::rcache
