#include "apps/comm/mpi/mpi_process_group.hpp"

#include <climits>
#include <cstdlib>

#include <fmt/format.h>

namespace tether::apps {

std::string describe_mpi_error(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return fmt::format("{} failed with MPI error {}: {}", call, code, std::string_view(text, static_cast<std::size_t>(length)));
}

Error mpi_error(const char* call, int code) {
  return Error{Errc::transport, code, describe_mpi_error(call, code),
               "check the Open MPI set-up (mpirun -n N, --oversubscribe on small machines)"};
}

Expected<void> MpiProcessGroup::initialise(int& argc, char**& argv) {
  int already = 0;
  MPI_Initialized(&already);
  if (already) return {};
  if (int code = MPI_Init(&argc, &argv); code != MPI_SUCCESS) return tl::unexpected(mpi_error("MPI_Init", code));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return {};
}

MpiProcessGroup::MpiProcessGroup() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiProcessGroup::~MpiProcessGroup() {
  // A run that failed before finish() still leaves MPI cleanly so mpirun does not hang.
  if (!finished_) (void)finish();
}

Expected<void> MpiProcessGroup::barrier() {
  if (int code = MPI_Barrier(MPI_COMM_WORLD); code != MPI_SUCCESS) return tl::unexpected(mpi_error("MPI_Barrier", code));
  return {};
}

Expected<std::vector<std::byte>> MpiProcessGroup::gather_to_root(std::span<const std::byte> mine) {
  std::vector<std::byte> all(rank_ == 0 ? mine.size() * static_cast<std::size_t>(size_) : 0);
  int count = static_cast<int>(mine.size());
  if (int code = MPI_Gather(mine.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, 0, MPI_COMM_WORLD);
      code != MPI_SUCCESS) {
    return tl::unexpected(mpi_error("MPI_Gather", code));
  }
  return all;
}

Expected<void> MpiProcessGroup::broadcast_from_root(std::span<std::byte> data) {
  if (int code = MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
      code != MPI_SUCCESS) {
    return tl::unexpected(mpi_error("MPI_Bcast", code));
  }
  return {};
}

Expected<void> MpiProcessGroup::finish() {
  if (finished_) return {};
  finished_ = true;
  int finalized = 0;
  MPI_Finalized(&finalized);  // another MPI mode of the run (--comm mpi,mpi-persist) did it
  if (finalized) return {};
  if (int code = MPI_Finalize(); code != MPI_SUCCESS) return tl::unexpected(mpi_error("MPI_Finalize", code));
  return {};
}

void MpiProcessGroup::abort_job(int exit_code) noexcept {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort should not return; never run on if it does
}

Expected<void> refuse_counts_past_int(const HaloPattern& pattern) {
  for (const auto* messages : {&pattern.sends, &pattern.receives})
    for (const HaloMessage& message : *messages)
      if (message.doubles > static_cast<std::size_t>(INT_MAX))
        return make_error(Errc::invalid_argument,
                          fmt::format("a halo message of {} doubles to rank {}: MPI counts stop at {}", message.doubles,
                                      message.peer, INT_MAX),
                          "use more ranks, fewer --fields, or a tether --comm mode");
  return {};
}

MpiMessageBuffers::MpiMessageBuffers(const HaloPattern& pattern) {
  for (const HaloMessage& message : pattern.sends) sends.emplace_back(message.doubles, 0.0);
  for (const HaloMessage& message : pattern.receives) receives.emplace_back(message.doubles, 0.0);
}

}  // namespace tether::apps
