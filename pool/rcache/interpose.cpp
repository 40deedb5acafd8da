// The interposition monitor: libtether.so defines the unmapping calls (munmap, mremap,
// madvise, brk, sbrk, mmap with MAP_FIXED, shmat with SHM_REMAP, shmdt), so every call
// through the PLT (the application's, other libraries') reports the range to the caches
// before the kernel drops it. glibc's own calls (free() of an mmapped block, heap trim)
// bind inside libc and are not seen: the userfaultfd monitor or TETHER_MALLOC_KEEP
// covers them (see pool/rcache/README.md).
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>

#include "pool/rcache/cache.hpp"
#include "pool/rcache/monitor.hpp"

namespace tether::rcache {
namespace {

std::atomic<bool> g_interpose{false};

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24  // Linux 5.18: drops locked pages too
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13: replaces pages with guard markers
#endif

bool drops_pages(int advice) {
  return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED ||
         advice == MADV_GUARD_INSTALL;
}

void report(const void* address, std::size_t length) noexcept {
  if (g_interpose.load(std::memory_order_relaxed)) monitor_notify(address, length);
}

using BrkFunction = int (*)(void*);
using SbrkFunction = void* (*)(intptr_t);

// brk/sbrk keep glibc's idea of the break: call the next definition, not the syscall.
template <class Function>
Function next_definition(const char* name, std::atomic<void*>& cache) noexcept {
  void* found = cache.load(std::memory_order_acquire);
  if (found == nullptr) {
    found = ::dlsym(RTLD_NEXT, name);
    cache.store(found, std::memory_order_release);
  }
  return reinterpret_cast<Function>(found);
}

std::atomic<void*> g_next_brk{nullptr};
std::atomic<void*> g_next_sbrk{nullptr};

// shmdt() names only the address: shmat() notes each attachment's size here (no lock, no
// allocation; the hooks may run anywhere). A detach not found (attached before libtether
// was loaded, or more attachments than slots) reports everything from its address up.
constexpr int kAttachmentSlots = 64;
std::atomic<std::uintptr_t> g_attached_at[kAttachmentSlots];
std::atomic<std::size_t> g_attached_bytes[kAttachmentSlots];

// The segment's mapped size (whole pages), 0 when it cannot be read.
std::size_t segment_bytes(int id) noexcept {
  shmid_ds status{};
  if (::syscall(SYS_shmctl, id, IPC_STAT, &status) != 0) return 0;
  return (status.shm_segsz + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// A record of the same address is replaced (an attachment over one that was unmapped).
void note_attachment(std::uintptr_t at, std::size_t bytes) noexcept {
  for (int i = 0; i < kAttachmentSlots; ++i) {
    if (g_attached_at[i].load() == at) return g_attached_bytes[i].store(bytes);
  }
  for (int i = 0; i < kAttachmentSlots; ++i) {
    std::uintptr_t none = 0;
    if (g_attached_at[i].compare_exchange_strong(none, at)) return g_attached_bytes[i].store(bytes);
  }
}

void* map_with_syscall(void* address, size_t length, int protection, int flags, int fd, off_t offset) noexcept {
  if ((flags & MAP_FIXED) != 0) report(address, length);
  return reinterpret_cast<void*>(::syscall(SYS_mmap, address, length, static_cast<long>(protection),
                                           static_cast<long>(flags), static_cast<long>(fd), offset));
}

std::size_t forget_attachment(std::uintptr_t at) noexcept {
  for (int i = 0; i < kAttachmentSlots; ++i) {
    if (g_attached_at[i].load() != at) continue;
    std::size_t bytes = g_attached_bytes[i].exchange(0);
    g_attached_at[i].store(0);
    return bytes;
  }
  return 0;
}

}  // namespace

void interpose_enable(bool on) noexcept { g_interpose.store(on, std::memory_order_relaxed); }
bool interpose_enabled() noexcept { return g_interpose.load(std::memory_order_relaxed); }

}  // namespace tether::rcache

using tether::rcache::report;

extern "C" {

__attribute__((visibility("default"))) int munmap(void* address, size_t length) noexcept {
  report(address, length);
  return static_cast<int>(::syscall(SYS_munmap, address, length));
}

__attribute__((visibility("default"))) void* mremap(void* old_address, size_t old_size, size_t new_size,
                                                    int flags, ...) noexcept {
  void* new_address = nullptr;
  if ((flags & MREMAP_FIXED) != 0) {
    va_list arguments;
    va_start(arguments, flags);
    new_address = va_arg(arguments, void*);
    va_end(arguments);
    report(new_address, new_size);  // whatever was mapped there goes away
  }
  // Moving or shrinking drops the old range's mapping (growing in place keeps it; a
  // move cannot be known in advance, so every remap invalidates the old range).
  report(old_address, old_size);
  return reinterpret_cast<void*>(::syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address));
}

__attribute__((visibility("default"))) int madvise(void* address, size_t length, int advice) noexcept {
  if (tether::rcache::drops_pages(advice)) report(address, length);
  return static_cast<int>(::syscall(SYS_madvise, address, length, advice));
}

// MAP_FIXED replaces whatever was mapped in the range (uffd reports that too, but only for
// ranges it watches and only while it runs).
__attribute__((visibility("default"))) void* mmap(void* address, size_t length, int protection, int flags, int fd,
                                                  off_t offset) noexcept {
  return tether::rcache::map_with_syscall(address, length, protection, flags, fd, offset);
}

__attribute__((visibility("default"))) void* mmap64(void* address, size_t length, int protection, int flags, int fd,
                                                    off64_t offset) noexcept {
  return tether::rcache::map_with_syscall(address, length, protection, flags, fd, offset);
}

// SysV shared memory: no uffd event for either call (the kernel refuses to watch most
// segments, and sends nothing for a detach or for SHM_REMAP over a watched range).
__attribute__((visibility("default"))) void* shmat(int id, const void* address, int flags) noexcept {
  std::size_t bytes = tether::rcache::segment_bytes(id);
  if ((flags & SHM_REMAP) != 0) {  // the kernel rounds down with SHM_RND; an unknown size: everything above
    auto start = reinterpret_cast<std::uintptr_t>(address);
    if ((flags & SHM_RND) != 0) start -= start % SHMLBA;
    report(reinterpret_cast<void*>(start), bytes != 0 ? bytes : UINTPTR_MAX - start);
  }
  auto at = ::syscall(SYS_shmat, id, address, flags);
  if (at != -1 && bytes != 0) tether::rcache::note_attachment(static_cast<std::uintptr_t>(at), bytes);
  return reinterpret_cast<void*>(at);
}

__attribute__((visibility("default"))) int shmdt(const void* address) noexcept {
  auto start = reinterpret_cast<std::uintptr_t>(address);
  std::size_t bytes = tether::rcache::forget_attachment(start);
  report(address, bytes != 0 ? bytes : UINTPTR_MAX - start);
  return static_cast<int>(::syscall(SYS_shmdt, address));
}

__attribute__((visibility("default"))) int brk(void* address) noexcept {
  void* now = reinterpret_cast<void*>(::syscall(SYS_brk, 0));
  if (address < now) report(address, static_cast<size_t>(static_cast<char*>(now) - static_cast<char*>(address)));
  auto next = tether::rcache::next_definition<tether::rcache::BrkFunction>("brk", tether::rcache::g_next_brk);
  return next != nullptr ? next(address) : -1;
}

__attribute__((visibility("default"))) void* sbrk(intptr_t increment) noexcept {
  if (increment < 0) {
    auto* now = static_cast<char*>(reinterpret_cast<void*>(::syscall(SYS_brk, 0)));
    report(now + increment, static_cast<size_t>(-increment));
  }
  auto next = tether::rcache::next_definition<tether::rcache::SbrkFunction>("sbrk", tether::rcache::g_next_sbrk);
  return next != nullptr ? next(increment) : reinterpret_cast<void*>(-1);
}

}  // extern "C"
