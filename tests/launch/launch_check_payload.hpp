// The value each launch-check rank publishes and the digest over every rank's value,
// shared by the rank program and the tests that check what it printed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tether::testing {

inline std::vector<std::byte> payload_of(int rank, std::size_t bytes) {
  std::vector<std::byte> payload(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    payload[i] = static_cast<std::byte>((static_cast<std::size_t>(rank) * 131 + i * 7 + (i >> 8)) & 0xff);
  return payload;
}

inline std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t hash = 14695981039346656037ull) {
  for (std::byte b : bytes) hash = (hash ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  return hash;
}

// What every rank of an n-rank job prints after verifying all values in rank order.
inline std::uint64_t job_digest(int ranks, std::size_t bytes) {
  std::uint64_t digest = fnv1a({});
  for (int rank = 0; rank < ranks; ++rank) digest = fnv1a(payload_of(rank, bytes), digest);
  return digest;
}

}  // namespace tether::testing
