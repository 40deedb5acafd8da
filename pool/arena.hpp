// Arenas: 2 MiB-aligned mappings that are pinned once and never unmapped, and the map
// that finds the arena of any address in O(1).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "pool/address_map.hpp"
#include "pool/page_heap.hpp"
#include "tether/pool.hpp"

namespace tether::pool {

inline constexpr std::size_t kArenaAlignment = std::size_t{2} << 20;
inline constexpr std::size_t kBlockBytes = std::size_t{64} << 10;  // span granule

enum class Backing : std::uint8_t { memfd, anon, hugetlb };
std::string_view backing_name(Backing backing) noexcept;
// "auto" picks hugetlb when enough free huge pages exist, else memfd.
Expected<Backing> choose_backing(std::string_view option, std::size_t bytes);

struct ArenaMapping {
  std::byte* base = nullptr;
  std::size_t length = 0;
  int fd = -1;
  Backing backing = Backing::memfd;
};

// Maps `length` bytes (a multiple of 2 MiB) aligned to 2 MiB, with MADV_DONTFORK and
// huge-page advice. Does not pin: registrars do.
Expected<ArenaMapping> map_arena(std::size_t length, Backing backing);

struct Span;
class SlabPool;

struct Arena {
  Arena(const ArenaMapping& mapping, SlabPool* owner, std::uint32_t index);

  ArenaMapping mapping;
  SlabPool* owner;
  std::uint32_t index;
  std::array<Registration, kMaxRegistrars> registrations{};
  std::atomic<std::uint32_t> registered_mask{0};
  PageHeap blocks;  // guarded by heap_mutex
  std::mutex heap_mutex;

  [[nodiscard]] std::size_t block_of(const void* pointer) const noexcept {
    return static_cast<std::size_t>(static_cast<const std::byte*>(pointer) - mapping.base) / kBlockBytes;
  }
};

// Process-wide maps: address -> arena (2 MiB granules), address -> span (64 KiB blocks).
inline AddressMap<Arena, 21> g_arena_map;
inline AddressMap<Span, 16> g_span_map;

void arena_map_insert(Arena* arena) noexcept;
[[nodiscard]] inline Arena* arena_map_find(const void* pointer) noexcept { return g_arena_map.find(pointer); }
[[nodiscard]] inline Span* span_map_find(const void* pointer) noexcept { return g_span_map.find(pointer); }

}  // namespace tether::pool
