// The measurement loops, written once for any messaging endpoint (tether or MPI):
// per size a barrier, one checksummed exchange in both directions, then the timed loop.
// Ranks 0 and 1 measure; other ranks only join the barriers. Rank 0 prints.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "apps/bench/bench_options.hpp"

namespace tether::bench {

// Blocking send/receive of `bytes` to/from `peer`, a window of `count` non-blocking ones
// completed together, a barrier over all ranks, and buffers. false = failed; error() says why.
template <class E>
concept Endpoint = requires(E endpoint, void* buffer, const void* data, std::size_t bytes, int peer, int count) {
  { endpoint.rank() } -> std::same_as<int>;
  { endpoint.send(data, bytes, peer) } -> std::same_as<bool>;
  { endpoint.receive(buffer, bytes, peer) } -> std::same_as<bool>;
  { endpoint.send_window(data, bytes, peer, count) } -> std::same_as<bool>;
  { endpoint.receive_window(buffer, bytes, peer, count) } -> std::same_as<bool>;
  { endpoint.barrier() } -> std::same_as<bool>;
  { endpoint.allocate(bytes) } -> std::same_as<void*>;
  endpoint.release(buffer);
  { endpoint.error() } -> std::convertible_to<std::string>;
};

// A send and a receive buffer of the largest size, released by the endpoint.
template <Endpoint E>
class BufferPair {
 public:
  BufferPair(E& endpoint, std::size_t bytes)
      : endpoint_(endpoint),
        out_(static_cast<std::byte*>(endpoint.allocate(bytes))),
        in_(static_cast<std::byte*>(endpoint.allocate(bytes))) {}
  ~BufferPair() {
    if (out_ != nullptr) endpoint_.release(out_);
    if (in_ != nullptr) endpoint_.release(in_);
  }
  BufferPair(const BufferPair&) = delete;
  BufferPair& operator=(const BufferPair&) = delete;
  [[nodiscard]] bool ok() const { return out_ != nullptr && in_ != nullptr; }
  [[nodiscard]] std::byte* out() const { return out_; }
  [[nodiscard]] std::byte* in() const { return in_; }

 private:
  E& endpoint_;
  std::byte* out_;
  std::byte* in_;
};

struct Failure {
  std::string why;
  bool set(std::string cause) {
    why = std::move(cause);
    return false;
  }
};

// Rank 0 sends `bytes` and receives them back; rank 1 receives, then sends.
template <Endpoint E>
bool round_trip(E& endpoint, const BufferPair<E>& buffers, std::size_t bytes) {
  int peer = 1 - endpoint.rank();
  if (endpoint.rank() == 0)
    return endpoint.send(buffers.out(), bytes, peer) && endpoint.receive(buffers.in(), bytes, peer);
  return endpoint.receive(buffers.in(), bytes, peer) && endpoint.send(buffers.out(), bytes, peer);
}

// Rank 0 sends its pattern, rank 1 checks it and answers with its own, rank 0 checks that.
template <Endpoint E>
bool verify_size(E& endpoint, const BufferPair<E>& buffers, std::size_t bytes, Failure& failure) {
  int me = endpoint.rank();
  int peer = 1 - me;
  fill_pattern(buffers.out(), bytes, me);
  std::memset(buffers.in(), 0, bytes);
  if (!round_trip(endpoint, buffers, bytes)) return failure.set(endpoint.error());
  std::uint64_t landed = checksum(buffers.in(), bytes);
  std::uint64_t expected = pattern_checksum(bytes, peer);
  if (landed == expected) return true;
  return failure.set(fmt::format("the {}-byte message from rank {} failed verification (checksum {:#x}, expected {:#x}): "
                            "the transfer is broken, so no figure is printed for it", bytes, peer, landed, expected));
}

using Clock = std::chrono::steady_clock;

inline double elapsed_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// One-way latency in microseconds: half the mean round trip, as OSU reports it.
template <Endpoint E>
bool time_latency(E& endpoint, const Options& options, const BufferPair<E>& buffers, std::size_t bytes, double& result) {
  long iterations = iterations_for(options, bytes);
  long warmup = warmup_for(options, bytes);
  Clock::time_point start = Clock::now();
  for (long i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) start = Clock::now();
    if (!round_trip(endpoint, buffers, bytes)) return false;
  }
  result = elapsed_us(start) / (2.0 * static_cast<double>(iterations));
  return true;
}

// Rank 0 streams windows of messages; rank 1 acknowledges each window with 4 bytes.
template <Endpoint E>
bool time_bandwidth(E& endpoint, const Options& options, const BufferPair<E>& buffers, std::size_t bytes, double& result) {
  long iterations = iterations_for(options, bytes);
  long warmup = warmup_for(options, bytes);
  std::byte acknowledgement[4] = {};
  Clock::time_point start = Clock::now();
  for (long i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) start = Clock::now();
    bool ok = endpoint.rank() == 0
                  ? endpoint.send_window(buffers.out(), bytes, 1, options.window) &&
                        endpoint.receive(acknowledgement, sizeof acknowledgement, 1)
                  : endpoint.receive_window(buffers.in(), bytes, 0, options.window) &&
                        endpoint.send(acknowledgement, sizeof acknowledgement, 0);
    if (!ok) return false;
  }
  double seconds = elapsed_us(start) / 1e6;
  result = static_cast<double>(bytes) * options.window * static_cast<double>(iterations) / seconds / 1e6;
  return true;
}

template <Endpoint E>
bool measure_size(E& endpoint, const Options& options, const BufferPair<E>& buffers, std::size_t bytes, Failure& failure) {
  if (!endpoint.barrier()) return failure.set(endpoint.error());
  if (endpoint.rank() > 1) return true;
  if (!verify_size(endpoint, buffers, bytes, failure)) return false;
  double value = 0;
  bool timed = options.test == Test::latency ? time_latency(endpoint, options, buffers, bytes, value)
                                             : time_bandwidth(endpoint, options, buffers, bytes, value);
  if (!timed) return failure.set(endpoint.error());
  if (endpoint.rank() == 0) print_row(options, bytes, value);
  return true;
}

// Runs every size; returns the exit code. `library` names what is measured in the header.
template <Endpoint E>
int run_benchmark(E& endpoint, const Options& options, std::string_view library, std::string_view program) {
  BufferPair<E> buffers(endpoint, largest_size(options) + 8);
  if (!buffers.ok()) {
    fmt::print(stderr, "{}: rank {}: no {}-byte buffers: {}\n", program, endpoint.rank(), largest_size(options),
               endpoint.error());
    return 1;
  }
  if (endpoint.rank() == 0) print_header(options, library);
  Failure failure;
  for (std::size_t bytes : options.sizes_bytes) {
    if (!measure_size(endpoint, options, buffers, bytes, failure)) {
      fmt::print(stderr, "{}: rank {}: at {} bytes: {}\n", program, endpoint.rank(), bytes, failure.why);
      return 1;
    }
  }
  return endpoint.barrier() ? 0 : 1;
}

}  // namespace tether::bench
