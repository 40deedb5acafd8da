// Test helpers for the transport suite: an endpoint wired to one peer, progressing waits,
// patterns and checksums.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>

#include "tests/transport/two_process.hpp"
#include "transport/transport.hpp"

namespace tether::testing {

using namespace std::chrono_literals;
using transport::Completion;
using transport::CompletionKind;

// Fills with a pattern that depends on `seed` and the position.
void fill_pattern(void* buffer, std::size_t size, std::uint64_t seed);
// FNV-1a over the bytes (position-sensitive).
std::uint64_t checksum(const void* buffer, std::size_t size);

// An open transport with one inserted peer and a backlog of completions seen while
// waiting for something else.
class ConnectedEndpoint {
 public:
  // Opens `spec` ("ofi:shm", "ofi:tcp", "verbs"), attaches the pool, swaps addresses.
  ConnectedEndpoint(const std::string& spec, const ControlChannel& control);
  transport::Transport& operator*() { return *transport_; }
  transport::Transport* operator->() { return transport_.get(); }
  [[nodiscard]] transport::PeerIndex peer() const { return peer_; }
  [[nodiscard]] bool ok() const { return transport_ != nullptr; }

  // The next completion of `kind` (or any error); an error with Errc::timeout after `timeout`.
  Completion wait(CompletionKind kind, std::chrono::milliseconds timeout = 30s);
  // Repeats `post` while it returns retry, polling in between; error after `timeout`.
  template <class Post>
  Status post(Post&& post_once, std::chrono::milliseconds timeout = 30s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      Status status = post_once();
      if (status != Status::retry || std::chrono::steady_clock::now() > deadline) return status;
      poll_into_backlog();
    }
  }
  // Control-channel reads that keep the transport progressing meanwhile.
  std::uint64_t receive_value(const ControlChannel& control);
  std::vector<std::byte> receive_bytes(const ControlChannel& control);
  // Polls until the other process closes the control channel (exits); false on timeout.
  bool wait_peer_exit(const ControlChannel& control, std::chrono::milliseconds timeout);
  void poll_into_backlog();
  std::deque<Completion>& backlog() { return backlog_; }

 private:
  std::unique_ptr<transport::Transport> transport_;
  transport::PeerIndex peer_ = transport::kUnknownPeer;
  std::deque<Completion> backlog_;
};

// A test's spec is a transport spec with an optional "+send" (ofi: notifications by send).
transport::OpenOptions options_for(const std::string& spec);
std::string backend_of(const std::string& spec);

}  // namespace tether::testing
