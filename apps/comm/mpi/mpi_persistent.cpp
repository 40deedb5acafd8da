// --comm mpi-persist: MPI_Recv_init/MPI_Send_init once per message when the exchange is
// created; every iteration is one MPI_Startall (start()) and one MPI_Waitall (wait()).
#include <fmt/format.h>

#include "apps/comm/mpi/mpi_backend.hpp"
#include "apps/comm/mpi/mpi_process_group.hpp"
#include "runtime/base/log.hpp"

namespace tether::apps {
namespace {

class MpiPersistentExchange final : public HaloExchange {
 public:
  explicit MpiPersistentExchange(const HaloPattern& pattern) : buffers_(pattern) {}
  ~MpiPersistentExchange() override {
    for (MPI_Request& request : requests_) MPI_Request_free(&request);
  }
  MpiPersistentExchange(const MpiPersistentExchange&) = delete;
  MpiPersistentExchange& operator=(const MpiPersistentExchange&) = delete;

  // Receives first, so each Startall posts them before the sends that match them.
  Expected<void> create_requests(const HaloPattern& pattern) {
    for (std::size_t i = 0; i < pattern.receives.size(); ++i) {
      const HaloMessage& message = pattern.receives[i];
      MPI_Request request;
      int code = MPI_Recv_init(buffers_.receives[i].data(), static_cast<int>(message.doubles), MPI_DOUBLE,
                               message.peer, message.tag, MPI_COMM_WORLD, &request);
      if (code != MPI_SUCCESS) return tl::unexpected(mpi_error("MPI_Recv_init", code));
      requests_.push_back(request);
    }
    for (std::size_t i = 0; i < pattern.sends.size(); ++i) {
      const HaloMessage& message = pattern.sends[i];
      MPI_Request request;
      int code = MPI_Send_init(buffers_.sends[i].data(), static_cast<int>(message.doubles), MPI_DOUBLE,
                               message.peer, message.tag, MPI_COMM_WORLD, &request);
      if (code != MPI_SUCCESS) return tl::unexpected(mpi_error("MPI_Send_init", code));
      requests_.push_back(request);
    }
    return {};
  }

  std::span<double> send_buffer(std::size_t index) noexcept override { return buffers_.sends[index]; }
  std::span<const double> receive_buffer(std::size_t index) noexcept override { return buffers_.receives[index]; }

  Status start() noexcept override {
    if (requests_.empty()) return Status::done;
    int code = MPI_Startall(static_cast<int>(requests_.size()), requests_.data());
    return code == MPI_SUCCESS ? Status::done : fail("MPI_Startall", code);
  }

  Status wait() noexcept override {
    if (requests_.empty()) return Status::done;
    int code = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    return code == MPI_SUCCESS ? Status::done : fail("MPI_Waitall", code);
  }

 private:
  static Status fail(const char* call, int code) noexcept {
    log::error("apps", "{}", describe_mpi_error(call, code));
    return Status::error;
  }

  MpiMessageBuffers buffers_;
  std::vector<MPI_Request> requests_;
};

class MpiPersistentBackend final : public MpiProcessGroup {
 public:
  Expected<std::unique_ptr<HaloExchange>> create_exchange(const HaloPattern& pattern) override {
    if (auto counted = refuse_counts_past_int(pattern); !counted) return tl::unexpected(counted.error());
    auto exchange = std::make_unique<MpiPersistentExchange>(pattern);
    if (auto created = exchange->create_requests(pattern); !created) return tl::unexpected(created.error());
    return exchange;
  }
};

}  // namespace

Expected<std::unique_ptr<CommBackend>> start_mpi_persistent_backend(int& argc, char**& argv) {
  if (auto started = MpiProcessGroup::initialise(argc, argv); !started) return tl::unexpected(started.error());
  return std::make_unique<MpiPersistentBackend>();
}

}  // namespace tether::apps
