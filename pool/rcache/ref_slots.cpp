// Reference slots: which row of counts a thread writes, and the fence a claimer issues
// between setting a flag and summing the rows.
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "pool/rcache/cache.hpp"

namespace tether::rcache {
namespace {

constexpr std::size_t kSharedRow = kRefSlots - 1;
static_assert(kSharedRefSlot.offset == kSharedRow * kEntriesPerBlock);
std::atomic<std::uint32_t> g_rows_taken{0};

long membarrier(int command) noexcept { return ::syscall(SYS_membarrier, command, 0, 0); }

// Rows may be written without a locked instruction only when a claimer can fence every
// running thread of the process (membarrier, Linux 4.14).
bool asymmetric_fences() noexcept {
  static const bool registered = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  return registered;
}

// A full fence as a locked read-modify-write (std::atomic_thread_fence is refused by TSan).
std::atomic<std::uint32_t> g_fence_word{0};
void full_fence() noexcept { g_fence_word.fetch_add(0, std::memory_order_seq_cst); }

// The other way to make every running thread of the process pass a full barrier: taking
// write permission from a page it has dirtied makes the kernel flush the TLBs of every CPU
// running this mm, by interrupt. Used when membarrier fails after it was registered (rows
// are already written without locked instructions, so a local fence would not do).
void barrier_by_tlb_shootdown() noexcept {
  static char* page = [] {
    void* mapped = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mapped == MAP_FAILED ? nullptr : static_cast<char*>(mapped);
  }();
  static std::atomic<bool> busy{false};
  while (busy.exchange(true, std::memory_order_acquire)) {
  }
  if (page != nullptr) {
    *static_cast<volatile char*>(page) = 1;
    ::mprotect(page, 4096, PROT_READ);
    ::mprotect(page, 4096, PROT_READ | PROT_WRITE);
  }
  busy.store(false, std::memory_order_release);
  full_fence();
}

// Gives the thread's row back when it exits. Later releases on this thread (other
// thread_local destructors) go to the shared row.
struct RowOwner {
  std::uint32_t bit = 0;
  ~RowOwner() {
    t_ref_slot = kSharedRefSlot;
    g_rows_taken.fetch_and(~bit, std::memory_order_release);
  }
};

}  // namespace

constinit __attribute__((tls_model("initial-exec"))) thread_local RefSlot t_ref_slot;

RefSlot assign_ref_slot() noexcept {
  t_ref_slot = kSharedRefSlot;
  if (!asymmetric_fences()) return t_ref_slot;
  std::uint32_t taken = g_rows_taken.load(std::memory_order_relaxed);
  for (std::size_t row = 0; row < kSharedRow; ++row) {
    std::uint32_t bit = 1U << row;
    if ((taken & bit) != 0) continue;
    taken = g_rows_taken.fetch_or(bit, std::memory_order_acquire);
    if ((taken & bit) != 0) continue;  // another thread took it first
    thread_local RowOwner owner;
    owner.bit = bit;
    t_ref_slot = RefSlot{row * kEntriesPerBlock};
    break;
  }
  return t_ref_slot;
}

// After a claimer's flag store and before it sums: every thread that added to its own row
// without a locked instruction has either made the add visible or will see the flag.
void fence_against_references() noexcept {
  if (!asymmetric_fences()) {
    full_fence();  // every row add is a locked instruction
    return;
  }
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  // A forked child may not inherit the registration: register again.
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return;
  barrier_by_tlb_shootdown();
}

}  // namespace tether::rcache
