#include "pool/arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "runtime/base/config.hpp"

namespace tether::pool {
namespace {

std::size_t free_huge_pages() {
  std::FILE* meminfo = std::fopen("/proc/meminfo", "re");
  if (meminfo == nullptr) return 0;
  char line[128];
  std::size_t pages = 0;
  while (std::fgets(line, sizeof line, meminfo) != nullptr)
    if (std::sscanf(line, "HugePages_Free: %zu", &pages) == 1) break;
  std::fclose(meminfo);
  return pages;
}

Error mapping_error(std::string_view call, std::size_t length, int sys_errno) {
  return Error{Errc::out_of_memory, sys_errno,
               fmt::format("{} of a {} arena failed: {}", call, config::format_size(length),
                           std::strerror(sys_errno)),
               "lower TETHER_POOL_SIZE / TETHER_POOL_ARENA_SIZE, or set TETHER_POOL_BACKING=anon"};
}

Expected<int> create_memfd(std::size_t length, Backing backing) {
  unsigned flags = MFD_CLOEXEC | (backing == Backing::hugetlb ? MFD_HUGETLB : 0U);
  int fd = ::memfd_create("tether-arena", flags);
  if (fd < 0) return tl::unexpected(mapping_error("memfd_create", length, errno));
  if (::ftruncate(fd, static_cast<off_t>(length)) != 0) {
    int saved = errno;
    ::close(fd);
    return tl::unexpected(mapping_error("ftruncate", length, saved));
  }
  return fd;
}

// Reserves length + 2 MiB of address space and returns its 2 MiB-aligned start.
Expected<std::byte*> reserve_aligned(std::size_t length) {
  std::size_t span = length + kArenaAlignment;
  void* raw = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return tl::unexpected(mapping_error("mmap", length, errno));
  auto start = reinterpret_cast<std::uintptr_t>(raw);
  auto aligned = (start + kArenaAlignment - 1) & ~(kArenaAlignment - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  std::size_t tail = start + span - (aligned + length);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
  return reinterpret_cast<std::byte*>(aligned);
}

Expected<void*> map_over(std::byte* where, std::size_t length, int fd) {
  int flags = MAP_FIXED | (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS);
  void* mapped = ::mmap(where, length, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (mapped == MAP_FAILED) return tl::unexpected(mapping_error("mmap", length, errno));
  return mapped;
}

}  // namespace

std::string_view backing_name(Backing backing) noexcept {
  switch (backing) {
    case Backing::memfd: return "memfd";
    case Backing::anon: return "anon";
    case Backing::hugetlb: return "hugetlb";
  }
  return "?";
}

Expected<Backing> choose_backing(std::string_view option, std::size_t bytes) {
  if (option == "memfd") return Backing::memfd;
  if (option == "anon") return Backing::anon;
  bool huge_pages_suffice = free_huge_pages() * kArenaAlignment >= bytes;
  if (option == "hugetlb" && !huge_pages_suffice)
    return make_error(Errc::unsupported,
                      fmt::format("TETHER_POOL_BACKING=hugetlb but only {} free 2M huge pages exist "
                                  "for {} of arenas", free_huge_pages(), config::format_size(bytes)),
                      "reserve pages (echo N > /proc/sys/vm/nr_hugepages) or use TETHER_POOL_BACKING=auto");
  return huge_pages_suffice ? Backing::hugetlb : Backing::memfd;
}

Expected<ArenaMapping> map_arena(std::size_t length, Backing backing) {
  ArenaMapping mapping{nullptr, length, -1, backing};
  if (backing != Backing::anon) {
    auto fd = create_memfd(length, backing);
    if (!fd) return tl::unexpected(fd.error());
    mapping.fd = *fd;
  }
  auto reserved = reserve_aligned(length);
  auto mapped = reserved ? map_over(*reserved, length, mapping.fd) : tl::unexpected(reserved.error());
  if (!mapped) {
    if (mapping.fd >= 0) ::close(mapping.fd);
    return tl::unexpected(mapped.error());
  }
  mapping.base = static_cast<std::byte*>(*mapped);
  ::madvise(mapping.base, length, MADV_HUGEPAGE);  // effective where THP allows it
  ::madvise(mapping.base, length, MADV_DONTFORK);
  return mapping;
}

Arena::Arena(const ArenaMapping& arena_mapping, SlabPool* pool, std::uint32_t arena_index)
    : mapping(arena_mapping),
      owner(pool),
      index(arena_index),
      blocks(static_cast<std::uint32_t>(arena_mapping.length / kBlockBytes)) {}

void arena_map_insert(Arena* arena) noexcept {
  if (!g_arena_map.set(arena->mapping.base, arena->mapping.length, arena)) std::abort();
}

}  // namespace tether::pool
