// Helpers for pool tests: registrars for failure injection and counting, child processes.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>

#include "pool/memlock.hpp"
#include "pool/mlock_registrar.hpp"
#include "pool/slab_pool.hpp"

namespace tether::testing {

// Failure injection: pins like the mlock registrar but fails the N-th call (1-based)
// and every call after it with `error_number`, as a NIC out of resources would.
class FailingOnNthCallRegistrar final : public Registrar {
 public:
  FailingOnNthCallRegistrar(int failing_call, int error_number)
      : failing_call_(failing_call), error_number_(error_number) {}
  std::string_view name() const noexcept override { return "failing-on-nth-call"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access access) override {
    if (++calls_ >= failing_call_) return tl::unexpected(pool::pinning_error(error_number_, length, "the test"));
    return pool::mlock_registrar().register_range(address, length, access);
  }
  void deregister(const Registration& registration) noexcept override {
    ++deregistrations_;
    pool::mlock_registrar().deregister(registration);
  }
  int calls() const { return calls_; }
  int deregistrations() const { return deregistrations_; }

 private:
  int failing_call_;
  int error_number_;
  std::atomic<int> calls_{0};
  std::atomic<int> deregistrations_{0};
};

// Records what it registered and hands out distinct keys (no pinning of its own).
class KeyIssuingRegistrar final : public Registrar {
 public:
  std::string_view name() const noexcept override { return "key-issuing"; }
  Expected<Registration> register_range(void* address, std::size_t length, Access) override {
    std::uint64_t key = ++registered_;
    return Registration{address, length, key, reinterpret_cast<void*>(key), nullptr};
  }
  void deregister(const Registration&) noexcept override { ++deregistered_; }
  std::atomic<std::uint64_t> registered_{0};
  std::atomic<std::uint64_t> deregistered_{0};
};

// Runs `body` in a forked child and returns its exit status (or 128 + signal).
inline int run_in_child(const std::function<int()>& body) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(body());
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline pool::PoolOptions small_pool_options(std::size_t initial, std::size_t max) {
  pool::PoolOptions options;
  options.initial_bytes = initial;
  options.max_bytes = max;
  options.arena_bytes = std::size_t{2} << 20;
  return options;
}

}  // namespace tether::testing
