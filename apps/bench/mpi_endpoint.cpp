// The benchmark endpoint over MPI (MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv windows with
// MPI_Waitall), and the main of the Open MPI baselines. Buffers are always malloc'd.
#include "apps/bench/mpi_endpoint.hpp"

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/bench/bench_loops.hpp"

namespace tether::bench {

std::string describe_mpi_failure(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(length)));
}
namespace {

constexpr int kBenchTag = 1;

class MpiEndpoint {
 public:
  MpiEndpoint() { MPI_Comm_rank(MPI_COMM_WORLD, &rank_); }

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] bool send(const void* data, std::size_t bytes, int peer) {
    return check(MPI_Send(data, count_of(bytes), MPI_BYTE, peer, kBenchTag, MPI_COMM_WORLD), "MPI_Send");
  }
  [[nodiscard]] bool receive(void* buffer, std::size_t bytes, int peer) {
    return check(MPI_Recv(buffer, count_of(bytes), MPI_BYTE, peer, kBenchTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 "MPI_Recv");
  }
  [[nodiscard]] bool send_window(const void* data, std::size_t bytes, int peer, int count) {
    window_.resize(static_cast<std::size_t>(count));
    for (MPI_Request& request : window_)
      if (!check(MPI_Isend(data, count_of(bytes), MPI_BYTE, peer, kBenchTag, MPI_COMM_WORLD, &request), "MPI_Isend"))
        return false;
    return check(MPI_Waitall(count, window_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  [[nodiscard]] bool receive_window(void* buffer, std::size_t bytes, int peer, int count) {
    window_.resize(static_cast<std::size_t>(count));
    for (MPI_Request& request : window_)
      if (!check(MPI_Irecv(buffer, count_of(bytes), MPI_BYTE, peer, kBenchTag, MPI_COMM_WORLD, &request), "MPI_Irecv"))
        return false;
    return check(MPI_Waitall(count, window_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  [[nodiscard]] bool barrier() { return check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  [[nodiscard]] void* allocate(std::size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void release(void* buffer) { std::free(buffer); }
  [[nodiscard]] std::string error() const { return error_; }

 private:
  static int count_of(std::size_t bytes) { return static_cast<int>(bytes); }
  bool check(int code, const char* call) {
    if (code == MPI_SUCCESS) return true;
    error_ = describe_mpi_failure(code, call);
    return false;
  }

  int rank_ = 0;
  std::vector<MPI_Request> window_;
  std::string error_;
};

int run_with_mpi(const Options& options, const char* program) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    fmt::print(stderr, "{}: needs 2 ranks, got {}: launch with mpirun -n 2 {}\n", program, size, program);
    return 2;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiEndpoint endpoint;
  return run_benchmark(endpoint, options, "Open MPI", program);
}

}  // namespace

int mpi_app_main(int argc, char** argv, Test test) {
  int exit_code = 0;
  auto options = parse_options(argc, argv, test, exit_code);
  if (!options) return exit_code;
  options->user_buffers = true;  // MPI gets plain malloc'd memory, as applications give it
  if (largest_size(*options) > static_cast<std::size_t>(2147483647)) {
    fmt::print(stderr, "{}: sizes above 2 GiB do not fit an MPI count; pass smaller --sizes\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  exit_code = run_with_mpi(*options, argv[0]);
  if (exit_code != 0) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  return exit_code;
}

}  // namespace tether::bench
