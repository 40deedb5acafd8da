// Helpers for registration cache tests: a counting mlock registrar, failure injection,
// mappings at fixed addresses, checksums, and what /proc says is locked.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "pool/memlock.hpp"
#include "pool/mlock_registrar.hpp"
#include "tether/rcache.hpp"

namespace tether::testing {

constexpr std::size_t kPage = 4096;

// Pins with mlock and issues a fresh key per registration, so a test can tell a new
// registration from a stale one.
class CountingMlockRegistrar : public Registrar {
 public:
  std::string_view name() const noexcept override { return "counting-mlock"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    auto done = pool::mlock_registrar().register_range(address, length, access);
    if (!done) return done;
    done->remote_key = ++registrations;
    bytes += length;
    return done;
  }
  void deregister(const Registration& registration) noexcept override {
    ++deregistrations;
    pool::mlock_registrar().deregister(registration);
  }
  std::atomic<std::uint64_t> registrations{0};
  std::atomic<std::uint64_t> deregistrations{0};
  std::atomic<std::uint64_t> bytes{0};
};

// Failure injection: refuses with ENOMEM once more than `capacity` bytes would be held,
// as a NIC out of memory-region resources would.
class FailingPastCapacityRegistrar final : public CountingMlockRegistrar {
 public:
  explicit FailingPastCapacityRegistrar(std::size_t capacity) : capacity_(capacity) {}
  std::string_view name() const noexcept override { return "failing-past-capacity"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    if (held_ + length > capacity_) return tl::unexpected(pool::pinning_error(ENOMEM, length, "the test"));
    held_ += length;
    return CountingMlockRegistrar::register_range(address, length, access);
  }
  void deregister(const Registration& registration) noexcept override {
    held_ -= registration.length;
    CountingMlockRegistrar::deregister(registration);
  }

 private:
  std::size_t capacity_;
  std::atomic<std::size_t> held_{0};
};

inline std::unique_ptr<RegistrationCache> make_cache(Registrar& registrar, RcacheOptions options = {}) {
  if (options.max_count == 0) options.max_count = 100000;
  if (options.max_bytes == 0) options.max_bytes = std::size_t{1} << 30;
  options.non_nesting = {true};
  Registrar* registrars[] = {&registrar};
  auto created = RegistrationCache::create(registrars, std::move(options));
  EXPECT_TRUE(created) << created.error().message();
  return created ? std::move(*created) : nullptr;
}

// Fresh pages; without `at`, placed at the start of a 2 MiB-aligned window, so a range
// under 2 MiB never straddles a cache chunk boundary (tests count entries exactly). The
// rest of the window stays reserved (untouched, so it costs no memory): once the test
// unmaps its pages, no other mapping can grow over the hole before it maps them again.
inline void* map_pages(std::size_t pages, void* at = nullptr) {
  constexpr std::size_t kWindow = std::size_t{2} << 20;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  std::size_t bytes = pages * kPage;
  if (at != nullptr) {
    void* memory = ::mmap(at, bytes, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, -1, 0);
    return memory == MAP_FAILED ? nullptr : memory;
  }
  void* reserved = ::mmap(nullptr, bytes + kWindow, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  auto start = reinterpret_cast<std::uintptr_t>(reserved);
  return reinterpret_cast<void*>((start + kWindow - 1) & ~(kWindow - 1));
}

// Maps `pages` again at `address` after a test unmapped them; skips the test when another
// mapping (a sanitizer's, a monitor thread's) took the address in between.
#define REMAP_OR_SKIP(address, pages)                                                              \
  do {                                                                                            \
    if (::tether::testing::map_pages(pages, address) != (address))                               \
      GTEST_SKIP() << "another mapping took " << (address) << " between unmap and map; rerun";   \
  } while (0)

inline std::uint64_t fill(void* buffer, std::size_t size, std::uint64_t seed) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<unsigned char>((seed * 131 + i * 7 + (i >> 12)) & 0xff);
    sum += bytes[i] * (i % 251 + 1);
  }
  return sum;
}

inline std::uint64_t checksum(const void* buffer, std::size_t size) {
  auto* bytes = static_cast<const unsigned char*>(buffer);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < size; ++i) sum += bytes[i] * (i % 251 + 1);
  return sum;
}

// Checksum of [address, address + size) read through the handle's registrations.
inline std::uint64_t checksum_through(const RcacheHandle& handle, const void* address, std::size_t size) {
  std::uint64_t sum = 0;
  auto start = reinterpret_cast<std::uintptr_t>(address);
  for (std::size_t done = 0; done < size;) {
    RcacheSegment segment = handle.segment_at(reinterpret_cast<void*>(start + done));
    if (segment.address == nullptr) return ~0ULL;
    auto* registered = static_cast<const unsigned char*>(segment.registrations[0].address);
    std::size_t offset = start + done - reinterpret_cast<std::uintptr_t>(segment.address);
    std::size_t piece = std::min(size - done, segment.length - offset);
    for (std::size_t i = 0; i < piece; ++i) sum += registered[offset + i] * ((done + i) % 251 + 1);
    done += piece;
  }
  return sum;
}

// "Locked:" of the /proc/self/smaps mapping that holds `address`, in kB (-1: none).
inline long locked_kb(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  auto wanted = reinterpret_cast<std::uintptr_t>(address);
  while (std::getline(smaps, line)) {
    auto dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {
      std::uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
      std::uintptr_t end = std::stoull(line.substr(dash + 1), nullptr, 16);
      inside = wanted >= start && wanted < end;
    } else if (inside && line.rfind("Locked:", 0) == 0) {
      return std::stol(line.substr(7));
    }
  }
  return -1;
}

// Runs `body` in a forked child with a watchdog; returns its exit status (128 + signal).
inline int run_with_watchdog(const std::function<int()>& body, unsigned timeout_seconds = 30) {
  pid_t child = ::fork();
  if (child == 0) {
    ::alarm(timeout_seconds);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace tether::testing
