#include "tests/transport/transport_support.hpp"

#include <cstring>

namespace tether::testing {

void fill_pattern(void* buffer, std::size_t size, std::uint64_t seed) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::size_t i = 0; i < size; ++i) {
    if ((i & 7) == 0) state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    bytes[i] = static_cast<unsigned char>(state >> (8 * (i & 7)));
  }
}

std::uint64_t checksum(const void* buffer, std::size_t size) {
  auto* bytes = static_cast<const unsigned char*>(buffer);
  std::uint64_t hash = 1469598103934665603ULL;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  return hash;
}

// "ofi:tcp+send": ofi:tcp with notifications sent as messages after their write lands.
transport::OpenOptions options_for(const std::string& spec) {
  transport::OpenOptions options;
  if (spec.starts_with("ofi:tcp")) options.domain = "lo";  // loopback only on this machine
  if (spec.ends_with("+send")) options.notify = "send";
  return options;
}

std::string backend_of(const std::string& spec) { return spec.substr(0, spec.find('+')); }

ConnectedEndpoint::ConnectedEndpoint(const std::string& spec, const ControlChannel& control) {
  auto opened = transport::open_transport(backend_of(spec), options_for(spec));
  if (!opened) {
    ADD_FAILURE() << "open_transport(" << spec << "): " << opened.error().message();
    return;
  }
  transport_ = std::move(*opened);
  auto attached = transport_->attach_pool();
  EXPECT_TRUE(attached) << (attached ? "" : attached.error().message());
  auto own = transport_->address();
  control.send_bytes(own);
  auto other = control.receive_bytes();
  auto inserted = transport_->insert_peer(other);
  if (!inserted) {
    ADD_FAILURE() << "insert_peer: " << inserted.error().message();
    transport_.reset();
    return;
  }
  peer_ = *inserted;
}

void ConnectedEndpoint::poll_into_backlog() {
  Completion completions[16];
  std::size_t count = transport_->poll(completions);
  for (std::size_t i = 0; i < count; ++i) backlog_.push_back(completions[i]);
}

Completion ConnectedEndpoint::wait(CompletionKind kind, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
      if (it->kind != kind && it->kind != CompletionKind::error) continue;
      Completion found = *it;
      backlog_.erase(it);
      return found;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    poll_into_backlog();
  }
  Completion timed_out;
  timed_out.failed_kind = kind;
  timed_out.error = Errc::timeout;
  timed_out.cause = "no completion before the test's timeout";
  return timed_out;
}

std::uint64_t ConnectedEndpoint::receive_value(const ControlChannel& control) {
  while (!control.readable()) poll_into_backlog();
  return control.receive_value();
}

bool ConnectedEndpoint::wait_peer_exit(const ControlChannel& control, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (control.readable()) return control.wait_closed(timeout);
    poll_into_backlog();
  }
  return false;
}

std::vector<std::byte> ConnectedEndpoint::receive_bytes(const ControlChannel& control) {
  while (!control.readable()) poll_into_backlog();
  return control.receive_bytes();
}

}  // namespace tether::testing
