// The measurement loops over persistent transfers, written once for tether's channels
// (channel_link.*) and MPI's persistent requests (mpi_persist.cpp). Ranks 0 and 1 call
// them: per size, one checksummed round trip, then the timed ping-pong or stream.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string>

#include <fmt/format.h>

#include "apps/bench/bench_loops.hpp"
#include "apps/bench/bench_options.hpp"

namespace tether::bench {

// Messages set up once and started many times between ranks 0 and 1. false = failed;
// error() says why.
template <class L>
concept PersistentLink = requires(L link, std::size_t bytes, int count, std::span<const std::byte>& message) {
  { link.rank() } -> std::same_as<int>;
  { link.prepare(bytes) } -> std::same_as<bool>;  // before a size (MPI: its requests)
  { link.send_buffer() } -> std::same_as<std::span<std::byte>>;  // where the next message is produced
  { link.expect(count) } -> std::same_as<bool>;   // the next `count` messages may land (MPI: start receives)
  { link.start(bytes) } -> std::same_as<bool>;    // sends the next message, waiting out back-pressure
  { link.complete_sends() } -> std::same_as<bool>;  // every started message left; buffers reusable
  { link.receive(message) } -> std::same_as<bool>;  // the next message, where it landed
  { link.release() } -> std::same_as<bool>;       // done with the oldest received message
  { link.send_acknowledgement() } -> std::same_as<bool>;
  { link.receive_acknowledgement() } -> std::same_as<bool>;
  { link.error() } -> std::convertible_to<std::string>;
};

template <PersistentLink L>
bool send_message(L& link, std::size_t bytes, Failure& failure) {
  return (link.start(bytes) && link.complete_sends()) || failure.set(link.error());
}

// The next message must be `bytes` long; its slot is handed back.
template <PersistentLink L>
bool receive_whole(L& link, std::size_t bytes, Failure& failure) {
  std::span<const std::byte> message;
  if (!link.receive(message)) return failure.set(link.error());
  if (message.size() != bytes)
    return failure.set(fmt::format("{} bytes landed where {} were sent", message.size(), bytes));
  return link.release() || failure.set(link.error());
}

inline bool check_pattern(std::span<const std::byte> message, std::size_t bytes, int sender, bool corrupt,
                          Failure& failure) {
  if (message.size() != bytes)
    return failure.set(fmt::format("{} bytes landed where {} were sent", message.size(), bytes));
  std::uint64_t landed = checksum(message.data(), bytes) ^ (corrupt ? 1U : 0U);
  std::uint64_t expected = pattern_checksum(bytes, sender);
  if (landed == expected) return true;
  return failure.set(fmt::format("the {}-byte message from rank {} failed verification (checksum {:#x}, expected "
                                 "{:#x}): the transfer is broken, so no figure is printed for it",
                                 bytes, sender, landed, expected));
}

template <PersistentLink L>
bool send_pattern(L& link, std::size_t bytes, Failure& failure) {
  fill_pattern(link.send_buffer().data(), bytes, link.rank());
  return send_message(link, bytes, failure);
}

// `corrupt` (tests only) treats the message as damaged, to prove the check can fail.
template <PersistentLink L>
bool receive_pattern(L& link, std::size_t bytes, bool corrupt, Failure& failure) {
  std::span<const std::byte> message;
  if (!link.receive(message)) return failure.set(link.error());
  if (!check_pattern(message, bytes, 1 - link.rank(), corrupt, failure)) return false;
  return link.release() || failure.set(link.error());
}

// Rank 0 sends its pattern, rank 1 checks it and answers with its own, rank 0 checks that.
template <PersistentLink L>
bool verify_persistent(L& link, std::size_t bytes, bool corrupt, Failure& failure) {
  if (!link.expect(1)) return failure.set(link.error());
  if (link.rank() == 0) return send_pattern(link, bytes, failure) && receive_pattern(link, bytes, false, failure);
  return receive_pattern(link, bytes, corrupt, failure) && send_pattern(link, bytes, failure);
}

template <PersistentLink L>
bool persistent_round_trip(L& link, std::size_t bytes, Failure& failure) {
  if (!link.expect(1)) return failure.set(link.error());
  if (link.rank() == 0) return send_message(link, bytes, failure) && receive_whole(link, bytes, failure);
  return receive_whole(link, bytes, failure) && send_message(link, bytes, failure);
}

// Rank 0 starts `window` messages as credits allow and waits for rank 1's acknowledgement.
template <PersistentLink L>
bool persistent_window(L& link, std::size_t bytes, int window, Failure& failure) {
  if (link.rank() == 0) {
    for (int k = 0; k < window; ++k)
      if (!link.start(bytes)) return failure.set(link.error());
    return (link.complete_sends() && link.receive_acknowledgement()) || failure.set(link.error());
  }
  if (!link.expect(window)) return failure.set(link.error());
  for (int k = 0; k < window; ++k)
    if (!receive_whole(link, bytes, failure)) return false;
  return link.send_acknowledgement() || failure.set(link.error());
}

// Runs `step` warm-up + timed times; the microseconds of the timed ones.
template <class Step>
bool time_steps(long warmup, long iterations, Step step, double& elapsed) {
  Clock::time_point start = Clock::now();
  for (long i = 0; i < warmup + iterations; ++i) {
    if (i == warmup) start = Clock::now();
    if (!step()) return false;
  }
  elapsed = elapsed_us(start);
  return true;
}

// One-way latency (us), or bandwidth (MB/s) of windows, at `bytes`; verified first.
template <PersistentLink L>
bool measure_persistent(L& link, const Options& options, std::size_t bytes, bool corrupt, Failure& failure,
                        double& result) {
  if (!link.prepare(bytes)) return failure.set(link.error());
  if (!verify_persistent(link, bytes, corrupt, failure)) return false;
  long iterations = iterations_for(options, bytes);
  double elapsed = 0;
  if (options.test == Test::latency) {
    auto step = [&] { return persistent_round_trip(link, bytes, failure); };
    if (!time_steps(warmup_for(options, bytes), iterations, step, elapsed)) return false;
    result = elapsed / (2.0 * static_cast<double>(iterations));
    return true;
  }
  auto step = [&] { return persistent_window(link, bytes, options.window, failure); };
  if (!time_steps(warmup_for(options, bytes), iterations, step, elapsed)) return false;
  result = static_cast<double>(bytes) * options.window * static_cast<double>(iterations) / elapsed;
  return true;
}

}  // namespace tether::bench
