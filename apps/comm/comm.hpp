// The seam between the shared halo code and the ways of moving halos. One CommBackend
// per --comm mode; it knows the ranks and makes a HaloExchange for a fixed pattern of
// messages. The shared code packs faces into the exchange's send buffers, calls start(),
// computes what needs no halo, calls wait(), and unpacks the receive buffers.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "tether/error.hpp"

namespace tether::apps {

// One message of the pattern: `doubles` values to or from `peer`, matched by `tag`.
struct HaloMessage {
  int peer = -1;
  int tag = 0;
  std::size_t doubles = 0;
};

// Everything a rank sends and receives in one iteration; the same every iteration.
struct HaloPattern {
  std::vector<HaloMessage> sends;
  std::vector<HaloMessage> receives;
};

// Created once per run (persistent requests, channels and buffers are set up here).
// Buffers belong to the exchange so a backend can hand out registered memory.
class HaloExchange {
 public:
  virtual ~HaloExchange() = default;
  [[nodiscard]] virtual std::span<double> send_buffer(std::size_t send_index) noexcept = 0;
  [[nodiscard]] virtual std::span<const double> receive_buffer(std::size_t receive_index) noexcept = 0;
  // Hot path, once per iteration each. start() sends every send buffer and posts every
  // receive; wait() returns when every receive buffer is filled and every send buffer
  // may be packed again. Status::error: failed, with the cause logged.
  [[nodiscard]] virtual Status start() noexcept = 0;
  [[nodiscard]] virtual Status wait() noexcept = 0;
};

// A started process group for one --comm mode. MPI modes bring up MPI here; tether
// modes will take rank and size from tether's own bootstrap, so nothing outside the
// mpi/ files may assume MPI is initialised.
class CommBackend {
 public:
  virtual ~CommBackend() = default;
  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  [[nodiscard]] virtual Expected<std::unique_ptr<HaloExchange>> create_exchange(const HaloPattern& pattern) = 0;
  [[nodiscard]] virtual Expected<void> barrier() = 0;
  // Rank 0 receives every rank's `mine` (the same length everywhere) in rank order;
  // the other ranks receive an empty vector.
  [[nodiscard]] virtual Expected<std::vector<std::byte>> gather_to_root(std::span<const std::byte> mine) = 0;
  // Every rank ends with rank 0's `data`.
  [[nodiscard]] virtual Expected<void> broadcast_from_root(std::span<std::byte> data) = 0;
  // Leaves the process group (MPI_Finalize for MPI modes). Called once, before exit.
  [[nodiscard]] virtual Expected<void> finish() = 0;
  // Ends every rank of the job now (MPI_Abort for MPI modes), for failures in the middle
  // of a run where the other ranks would otherwise wait forever.
  [[noreturn]] virtual void abort_job(int exit_code) noexcept = 0;
};

// An exchange with no messages, for one rank alone and for the serial reference.
class NoMessageExchange final : public HaloExchange {
 public:
  std::span<double> send_buffer(std::size_t) noexcept override { return {}; }
  std::span<const double> receive_buffer(std::size_t) noexcept override { return {}; }
  Status start() noexcept override { return Status::done; }
  Status wait() noexcept override { return Status::done; }
};

}  // namespace tether::apps
