// Two real processes per test: fork both sides, give each one end of a socketpair for
// address exchange and barriers, and kill both if the watchdog expires.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/ofi/shm_regions.hpp"

namespace tether::testing {

// One side's control channel to the other (not the data path).
class ControlChannel {
 public:
  explicit ControlChannel(int fd) : fd_(fd) {}
  void send_bytes(std::span<const std::byte> bytes) const {
    std::uint64_t length = bytes.size();
    write_all(&length, sizeof(length));
    write_all(bytes.data(), bytes.size());
  }
  std::vector<std::byte> receive_bytes() const {
    std::uint64_t length = 0;
    read_all(&length, sizeof(length));
    std::vector<std::byte> bytes(length);
    read_all(bytes.data(), bytes.size());
    return bytes;
  }
  void send_value(std::uint64_t value) const { write_all(&value, sizeof(value)); }
  std::uint64_t receive_value() const {
    std::uint64_t value = 0;
    read_all(&value, sizeof(value));
    return value;
  }
  // Whether a value can be read without blocking (or the other side closed).
  [[nodiscard]] bool readable() const {
    pollfd entry{fd_, POLLIN, 0};
    return ::poll(&entry, 1, 0) > 0;
  }
  // Blocks until the other side closes its end (exits); false after `timeout`.
  [[nodiscard]] bool wait_closed(std::chrono::milliseconds timeout) const {
    pollfd entry{fd_, POLLIN, 0};
    char byte;
    while (::poll(&entry, 1, static_cast<int>(timeout.count())) > 0)
      if (::read(fd_, &byte, 1) <= 0) return true;
    return false;
  }
  void barrier() const {
    send_value(0xba);
    (void)receive_value();
  }

 private:
  void write_all(const void* data, std::size_t size) const {
    auto* bytes = static_cast<const char*>(data);
    while (size > 0) {
      ssize_t written = ::write(fd_, bytes, size);
      if (written <= 0) ::_exit(3);  // the other side is gone: give up, do not hang
      bytes += written;
      size -= static_cast<std::size_t>(written);
    }
  }
  void read_all(void* data, std::size_t size) const {
    auto* bytes = static_cast<char*>(data);
    while (size > 0) {
      ssize_t got = ::read(fd_, bytes, size);
      if (got <= 0) ::_exit(3);
      bytes += got;
      size -= static_cast<std::size_t>(got);
    }
  }
  int fd_;
};

using Side = std::function<void(const ControlChannel&)>;

struct PairOutcome {
  int status[2] = {-1, -1};  // exit codes; 128 + signal when killed
  bool timed_out = false;
};

// Reaps `child` once it ended (at once unless `block`), with its exit status. A child that
// skipped closing a libfabric shm endpoint (_exit, a kill) leaves a region named after its
// pid: it is removed first, while the zombie still holds the pid.
inline bool reap(pid_t child, int& status, bool block) {
  siginfo_t ended{};
  if (::waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOWAIT | (block ? 0 : WNOHANG)) != 0 ||
      ended.si_pid != child)
    return false;
  (void)tether::transport::ofi::remove_shm_regions_of(child);
  return ::waitpid(child, &status, 0) == child;
}

// Runs `first` and `second` in two forked children. A child exits 0 when it recorded no
// gtest failure. After `watchdog` both are killed and timed_out is set.
inline PairOutcome run_pair(const Side& first, const Side& second, std::chrono::seconds watchdog) {
  int fds[2];
  PairOutcome outcome;
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return outcome;
  pid_t children[2] = {-1, -1};
  const Side* sides[2] = {&first, &second};
  for (int i = 0; i < 2; ++i) {
    children[i] = ::fork();
    if (children[i] == 0) {
      ::close(fds[1 - i]);
      (*sides[i])(ControlChannel(fds[i]));
      std::fflush(stdout);
      ::_exit(::testing::Test::HasFailure() ? 1 : 0);
    }
  }
  ::close(fds[0]);
  ::close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + watchdog;
  int remaining = 2;
  while (remaining > 0) {
    for (int i = 0; i < 2; ++i) {
      int status = 0;
      if (children[i] < 0 || !reap(children[i], status, false)) continue;
      outcome.status[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      children[i] = -1;
      --remaining;
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      outcome.timed_out = true;
      for (pid_t child : children)
        if (child > 0) ::kill(child, SIGKILL);
      int status = 0;
      for (pid_t child : children)
        if (child > 0) (void)reap(child, status, true);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return outcome;
}

// Both processes exited 0 before the watchdog.
inline void expect_both_passed(const PairOutcome& outcome) {
  EXPECT_FALSE(outcome.timed_out) << "the watchdog killed the pair";
  EXPECT_EQ(outcome.status[0], 0) << "the first process failed (its output is above)";
  EXPECT_EQ(outcome.status[1], 0) << "the second process failed (its output is above)";
}

}  // namespace tether::testing
