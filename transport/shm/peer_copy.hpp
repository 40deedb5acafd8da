// Copies into a peer's memory on this node (shm-own RMA writes, persistent channels'
// direct stores). Above a threshold the copy streams past the cache (non-temporal stores):
// where the source and the destination together outgrow the L2, a plain copy reads every
// destination line before it writes it; streaming skips that read. The destination's lines
// then wait in memory, not in this CPU's cache, so a receiver that reads them soon waits
// longer: off by default (TETHER_SHM_STREAMING_COPY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "tether/error.hpp"

namespace tether::transport::shm {

// TETHER_SHM_STREAMING_COPY, parsed once: copies of at least this many bytes stream (off:
// SIZE_MAX; on: half of this CPU's L2), or why the setting is refused (the shm transport's
// open fails with it).
[[nodiscard]] const Expected<std::size_t>& streaming_copy_setting();
// The setting's threshold, SIZE_MAX when it was refused.
[[nodiscard]] std::size_t streaming_copy_threshold() noexcept;
[[nodiscard]] Expected<std::size_t> parse_streaming_copy(std::string_view text);
// This CPU's L2 cache in bytes (1 MiB when the system does not say).
[[nodiscard]] std::size_t l2_cache_bytes() noexcept;

// Non-temporal stores, 64 bytes at a time, from the first 64-byte-aligned destination byte
// (whole lines); plain copies for the head and the tail. Ends with a store fence, so a flag stored after it
// (release) is never seen before the bytes.
inline void stream_copy(void* destination, const void* source, std::size_t bytes) noexcept {
#if defined(__x86_64__)
  auto* to = static_cast<std::byte*>(destination);
  const auto* from = static_cast<const std::byte*>(source);
  std::size_t head = (64 - reinterpret_cast<std::uintptr_t>(to) % 64) % 64;
  if (head > bytes) head = bytes;
  std::memcpy(to, from, head);
  std::size_t done = head;
  for (; done + 64 <= bytes; done += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done + 48), d);
  }
  std::memcpy(to + done, from + done, bytes - done);
  _mm_sfence();
#else
  std::memcpy(destination, source, bytes);
#endif
}

// True when the copy streamed.
inline bool copy_to_peer(void* destination, const void* source, std::size_t bytes, std::size_t streaming_from) noexcept {
  if (bytes < streaming_from) return std::memcpy(destination, source, bytes), false;
  stream_copy(destination, source, bytes);
  return true;
}

}  // namespace tether::transport::shm
