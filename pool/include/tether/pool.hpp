// The pinned pool: buffers that are registered with every transport domain before they
// are handed out, so sending from them never pays for pinning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <string_view>
#include <vector>

#include "tether/error.hpp"

namespace tether {

// Rights asked of a registration (bit set).
enum class Access : std::uint32_t {
  local_read = 1,
  local_write = 2,
  remote_read = 4,
  remote_write = 8,
  all = 15,
};

// What one registrar returns for one range.
struct Registration {
  void* address = nullptr;
  std::size_t length = 0;
  std::uint64_t remote_key = 0;       // what a peer names the range by (0 if none)
  void* local_descriptor = nullptr;   // what local operations pass (fi_mr_desc, lkey, ...)
  void* handle = nullptr;             // the registrar's own object (fid_mr*, ibv_mr*, ...)
};

// Pins or registers ranges. The pool registers every arena with every registrar it has;
// the registration cache does the same for user memory. Implementations must be
// thread-safe. Ranges from the pool and the cache are page-aligned; a transport's own
// registrar also gets byte-exact ranges of pool memory whose key it hands to a peer
// (Transport::expose_pool_range).
class Registrar {
 public:
  virtual ~Registrar() = default;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  [[nodiscard]] virtual Expected<Registration> register_range(void* address, std::size_t length,
                                                              Access access) = 0;
  virtual void deregister(const Registration& registration) noexcept = 0;
};

inline constexpr int kMaxRegistrars = 8;

// Where a pool pointer lives, found in O(1).
struct PoolLocation {
  void* arena_base = nullptr;
  std::size_t arena_length = 0;
  int arena_fd = -1;            // memfd behind the arena, -1 for private memory
  std::size_t offset = 0;       // of the pointer inside the arena
  std::size_t usable_bytes = 0; // of the buffer the pointer starts (0 for an interior pointer)
  const Registration* registrations = nullptr;  // kMaxRegistrars slots, indexed by slot
  std::uint32_t registered_mask = 0;            // bit i set: slot i holds a registration
};

struct PoolClassStats {
  std::size_t object_bytes = 0;
  std::uint64_t objects_carved = 0;  // slab objects of this class that exist
  std::uint64_t objects_in_use = 0;  // handed out and not freed (a racy snapshot)
};

struct PoolStats {
  std::uint64_t bytes_mapped = 0;
  std::uint64_t bytes_pinned = 0;
  std::uint64_t bytes_carved = 0;        // handed to slabs and large buffers now
  std::uint64_t high_water_bytes = 0;    // most bytes_carved ever
  std::uint64_t arenas = 0;
  std::uint64_t registrations = 0;       // successful register_range calls, all registrars
  std::uint64_t deregistrations = 0;
  std::uint64_t bad_frees = 0;
  std::uint64_t large_allocations = 0;
  std::uint64_t large_frees = 0;
  std::vector<PoolClassStats> classes;
};

// --- The process-wide pool, started on first use from the TETHER_POOL_* options. ---

// A pinned buffer of at least `size` bytes, aligned to `alignment` (a power of two), or
// nullptr with the reason logged and kept in pinned_last_error().
[[nodiscard]] void* pinned_alloc(std::size_t size, std::size_t alignment = 16) noexcept;
[[nodiscard]] Expected<void*> pinned_try_alloc(std::size_t size, std::size_t alignment = 16);
// Returns a buffer. A pointer that is not from the pool, an interior pointer or a second
// free is refused with an error naming the address; the pool is left untouched.
void pinned_free(void* pointer) noexcept;
// The reason of this thread's last failed pinned_alloc.
[[nodiscard]] const Error& pinned_last_error() noexcept;

// O(1): whether `pointer` lies in a pool arena, and its registrations.
[[nodiscard]] bool pool_find(const void* pointer, PoolLocation& location) noexcept;
// Registers every arena with `registrar` now and every later arena as it is mapped.
// Returns the slot of its registrations in PoolLocation::registrations.
[[nodiscard]] Expected<int> pool_add_registrar(Registrar& registrar, Access access = Access::all);
// Deregisters every arena from the registrar in `slot`.
void pool_remove_registrar(int slot) noexcept;
[[nodiscard]] PoolStats pool_stats();

// STL allocator over the pinned pool: std::vector<double, tether::pinned_allocator<double>>.
template <class T>
struct pinned_allocator {
  using value_type = T;
  pinned_allocator() noexcept = default;
  template <class U>
  pinned_allocator(const pinned_allocator<U>&) noexcept {}

  [[nodiscard]] T* allocate(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    void* memory = pinned_alloc(count * sizeof(T), alignof(T) > 16 ? alignof(T) : 16);
    if (memory == nullptr) throw std::bad_alloc();
    return static_cast<T*>(memory);
  }
  void deallocate(T* pointer, std::size_t) noexcept { pinned_free(pointer); }

  template <class U>
  bool operator==(const pinned_allocator<U>&) const noexcept { return true; }
};

}  // namespace tether
