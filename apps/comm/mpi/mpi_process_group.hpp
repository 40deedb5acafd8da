// MPI_COMM_WORLD as a CommBackend minus the exchange: rank, size and the collectives the
// shared code uses for timing, verification and the heat map.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "apps/comm/comm.hpp"

namespace tether::apps {

// "MPI_Isend failed: <MPI's error string>".
[[nodiscard]] std::string describe_mpi_error(const char* call, int code);
[[nodiscard]] Error mpi_error(const char* call, int code);

class MpiProcessGroup : public CommBackend {
 public:
  // MPI_Init (errors return instead of aborting the job).
  static Expected<void> initialise(int& argc, char**& argv);
  MpiProcessGroup();
  ~MpiProcessGroup() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  Expected<void> barrier() override;
  Expected<std::vector<std::byte>> gather_to_root(std::span<const std::byte> mine) override;
  Expected<void> broadcast_from_root(std::span<std::byte> data) override;
  Expected<void> finish() override;
  [[noreturn]] void abort_job(int exit_code) noexcept override;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool finished_ = false;
};

// MPI counts are ints: a message of more doubles than INT_MAX is refused by name.
[[nodiscard]] Expected<void> refuse_counts_past_int(const HaloPattern& pattern);

// Buffers for a pattern: one vector per message, owned by the exchange.
struct MpiMessageBuffers {
  explicit MpiMessageBuffers(const HaloPattern& pattern);
  std::vector<std::vector<double>> sends;
  std::vector<std::vector<double>> receives;
};

}  // namespace tether::apps
