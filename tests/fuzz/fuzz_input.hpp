// Helpers shared by the fuzz targets: reading fixed-size values from the fuzzer's bytes,
// and a failed invariant that stops the run with a message (libFuzzer records the input).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>

namespace tether::fuzz {

[[noreturn]] inline void invariant_broken(const char* what, int line) {
  std::fprintf(stderr, "fuzz invariant broken at line %d: %s\n", line, what);
  std::abort();
}

// Consumes bytes from the front of the input; past its end every value reads as zero.
class InputReader {
 public:
  InputReader(const std::uint8_t* data, std::size_t size) : bytes_(reinterpret_cast<const std::byte*>(data), size) {}

  template <class T>
    requires std::is_trivially_copyable_v<T>
  T take() noexcept {
    T value{};
    std::size_t count = std::min(sizeof(T), bytes_.size());
    if (count > 0) std::memcpy(&value, bytes_.data(), count);
    bytes_ = bytes_.subspan(count);
    return value;
  }
  [[nodiscard]] std::span<const std::byte> rest() const noexcept { return bytes_; }
  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }

 private:
  std::span<const std::byte> bytes_;
};

}  // namespace tether::fuzz

#define FUZZ_ASSERT(condition)                                                   \
  do {                                                                           \
    if (!(condition)) ::tether::fuzz::invariant_broken(#condition, __LINE__);    \
  } while (0)
