// Test payloads a receiver can recompute: bytes drawn from (source, sequence), and the
// check of what landed against them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace tether::testing {

inline void fill(std::span<std::byte> out, std::uint64_t source, std::uint64_t sequence) {
  std::uint64_t state = (source + 1) * 0x9e3779b97f4a7c15ULL ^ sequence;
  for (std::byte& b : out) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<std::byte>(state >> 56);
  }
}

inline bool matches(std::span<const std::byte> in, std::uint64_t source, std::uint64_t sequence) {
  if (in.empty()) return true;
  std::vector<std::byte> expected(in.size());
  fill(expected, source, sequence);
  return std::memcmp(in.data(), expected.data(), in.size()) == 0;
}

}  // namespace tether::testing
