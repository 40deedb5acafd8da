// Size classes: 64 B to 256 KiB, powers of two with a 1.5x step between them
// (64, 96, 128, 192, ... 192K, 256K). A class's natural alignment is the largest power
// of two dividing its size, capped at the 64 KiB span granule.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tether::pool {

inline constexpr std::size_t kSmallestClassBytes = 64;
inline constexpr std::size_t kLargestClassBytes = std::size_t{256} << 10;
inline constexpr int kClassCount = 25;
inline constexpr int kNotAClass = -1;
inline constexpr std::size_t kMaxClassAlignment = std::size_t{64} << 10;

constexpr std::size_t class_bytes(int size_class) noexcept {
  // even index 2k: 64 << k; odd index 2k-1: 96 << (k-1)
  return size_class % 2 == 0 ? kSmallestClassBytes << (size_class / 2)
                             : std::size_t{96} << (size_class / 2);
}

constexpr std::size_t class_alignment(int size_class) noexcept {
  std::size_t bytes = class_bytes(size_class);
  return std::min(bytes & (~bytes + 1), kMaxClassAlignment);
}

// The smallest class that holds `size` bytes at `alignment`, or kNotAClass when the
// request is for the large-buffer path.
constexpr int class_for(std::size_t size, std::size_t alignment) noexcept {
  std::size_t bytes = std::max({size, alignment, kSmallestClassBytes});
  if (bytes > kLargestClassBytes || alignment > kMaxClassAlignment) return kNotAClass;
  int power = static_cast<int>(std::bit_width(bytes - 1));  // 2^power >= bytes
  int power_class = 2 * (power - 6);
  std::size_t three_quarters = std::size_t{3} << (power - 2);
  if (power >= 7 && bytes <= three_quarters && alignment <= class_alignment(power_class - 1))
    return power_class - 1;
  return power_class;  // 2^power >= alignment, so its natural alignment suffices
}

constexpr bool is_power_of_two(std::size_t value) noexcept {
  return value != 0 && (value & (value - 1)) == 0;
}

// class_for() for sizes up to 1 KiB at alignments up to 16, by table: the common case.
inline constexpr std::size_t kTableMaxBytes = 1024;
// Hidden: each binary reads its own copy directly, not through the global offset table.
__attribute__((visibility("hidden"))) inline constexpr auto kSmallClassTable = [] {
  std::array<std::int8_t, kTableMaxBytes / 16 + 1> table{};
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<std::int8_t>(class_for(i == 0 ? 1 : i * 16, 16));
  return table;
}();

static_assert([] {
  for (std::size_t i = 1; i < kSmallClassTable.size(); ++i)
    if (kSmallClassTable[i] == kNotAClass) return false;
  return true;
}());  // every size up to the table's end has a class

// Bytes of one span of the class: 64 KiB, or room for eight objects.
constexpr std::size_t span_bytes(int size_class) noexcept {
  constexpr std::size_t kGranule = std::size_t{64} << 10;
  std::size_t eight = 8 * class_bytes(size_class);
  return std::max(kGranule, (eight + kGranule - 1) / kGranule * kGranule);
}

static_assert(class_bytes(kClassCount - 1) == kLargestClassBytes);
static_assert(class_for(1, 16) == 0 && class_for(64, 16) == 0 && class_for(65, 16) == 1);
static_assert(class_for(96, 64) == 2 && class_for(97, 16) == 2 && class_for(4096, 16) == 12);
static_assert(class_for(100, 4096) == 12 && class_for(kLargestClassBytes + 1, 16) == kNotAClass);

}  // namespace tether::pool
