// --comm mpi: every iteration posts one MPI_Irecv per receive and one MPI_Isend per send,
// and wait() waits for all of them.
#include <fmt/format.h>

#include "apps/comm/mpi/mpi_backend.hpp"
#include "apps/comm/mpi/mpi_process_group.hpp"
#include "runtime/base/log.hpp"

namespace tether::apps {
namespace {

class MpiIsendExchange final : public HaloExchange {
 public:
  explicit MpiIsendExchange(const HaloPattern& pattern)
      : pattern_(pattern), buffers_(pattern), requests_(pattern.sends.size() + pattern.receives.size(), MPI_REQUEST_NULL) {}

  std::span<double> send_buffer(std::size_t index) noexcept override { return buffers_.sends[index]; }
  std::span<const double> receive_buffer(std::size_t index) noexcept override { return buffers_.receives[index]; }

  Status start() noexcept override {
    std::size_t next = 0;
    for (std::size_t i = 0; i < pattern_.receives.size(); ++i) {
      const HaloMessage& message = pattern_.receives[i];
      int code = MPI_Irecv(buffers_.receives[i].data(), static_cast<int>(message.doubles), MPI_DOUBLE,
                           message.peer, message.tag, MPI_COMM_WORLD, &requests_[next++]);
      if (code != MPI_SUCCESS) return fail("MPI_Irecv", code);
    }
    for (std::size_t i = 0; i < pattern_.sends.size(); ++i) {
      const HaloMessage& message = pattern_.sends[i];
      int code = MPI_Isend(buffers_.sends[i].data(), static_cast<int>(message.doubles), MPI_DOUBLE,
                           message.peer, message.tag, MPI_COMM_WORLD, &requests_[next++]);
      if (code != MPI_SUCCESS) return fail("MPI_Isend", code);
    }
    return Status::done;
  }

  Status wait() noexcept override {
    int code = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    return code == MPI_SUCCESS ? Status::done : fail("MPI_Waitall", code);
  }

 private:
  static Status fail(const char* call, int code) noexcept {
    log::error("apps", "{}", describe_mpi_error(call, code));
    return Status::error;
  }

  HaloPattern pattern_;
  MpiMessageBuffers buffers_;
  std::vector<MPI_Request> requests_;
};

class MpiIsendBackend final : public MpiProcessGroup {
 public:
  Expected<std::unique_ptr<HaloExchange>> create_exchange(const HaloPattern& pattern) override {
    if (auto counted = refuse_counts_past_int(pattern); !counted) return tl::unexpected(counted.error());
    return std::make_unique<MpiIsendExchange>(pattern);
  }
};

}  // namespace

Expected<std::unique_ptr<CommBackend>> start_mpi_isend_backend(int& argc, char**& argv) {
  if (auto started = MpiProcessGroup::initialise(argc, argv); !started) return tl::unexpected(started.error());
  return std::make_unique<MpiIsendBackend>();
}

}  // namespace tether::apps
