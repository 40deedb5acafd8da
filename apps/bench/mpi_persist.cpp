// tether-mpi-bench-persist: the Open MPI baseline of tether-bench-persist. The same loops
// over persistent requests: MPI_Send_init/MPI_Recv_init once per size, then MPI_Start(all)
// and MPI_Wait(all); a window of them for bandwidth. Buffers are malloc'd.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "apps/bench/mpi_endpoint.hpp"
#include "apps/bench/persist_report.hpp"
#include "apps/bench/persistent_loops.hpp"

namespace tether::bench {
namespace {

constexpr int kDataTag = 1;
constexpr int kAcknowledgementTag = 2;

class MpiPersistentLink {
 public:
  MpiPersistentLink(int window, std::size_t largest_bytes)
      : window_(window), largest_bytes_(largest_bytes),
        send_buffer_(static_cast<std::byte*>(std::aligned_alloc(64, (largest_bytes + 63) / 64 * 64))),
        receive_buffer_(static_cast<std::byte*>(std::aligned_alloc(64, (largest_bytes + 63) / 64 * 64))) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }
  ~MpiPersistentLink() {
    free_requests();
    std::free(send_buffer_);
    std::free(receive_buffer_);
  }
  MpiPersistentLink(const MpiPersistentLink&) = delete;
  MpiPersistentLink& operator=(const MpiPersistentLink&) = delete;

  [[nodiscard]] bool ok() const { return send_buffer_ != nullptr && receive_buffer_ != nullptr; }
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] bool prepare(std::size_t bytes);
  [[nodiscard]] std::span<std::byte> send_buffer() { return {send_buffer_, largest_bytes_}; }
  [[nodiscard]] bool expect(int count);
  [[nodiscard]] bool start(std::size_t bytes);
  [[nodiscard]] bool complete_sends();
  [[nodiscard]] bool receive(std::span<const std::byte>& message);
  [[nodiscard]] bool release() { return true; }  // MPI copied the message out already
  [[nodiscard]] bool send_acknowledgement() { return start_and_wait(acknowledgement_send_, "acknowledgement send"); }
  [[nodiscard]] bool receive_acknowledgement() {
    return start_and_wait(acknowledgement_receive_, "acknowledgement receive");
  }
  [[nodiscard]] std::string error() const { return error_; }

 private:
  bool check(int code, const char* call);
  bool start_and_wait(MPI_Request& request, const char* what);
  void free_requests();

  int rank_ = 0;
  int window_;
  std::size_t largest_bytes_;
  std::size_t prepared_bytes_ = 0;
  std::byte* send_buffer_;
  std::byte* receive_buffer_;
  std::byte acknowledgement_[1] = {};
  std::vector<MPI_Request> sends_;     // all from send_buffer_, as OSU's window does
  std::vector<MPI_Request> receives_;  // all into receive_buffer_
  MPI_Request acknowledgement_send_ = MPI_REQUEST_NULL;
  MPI_Request acknowledgement_receive_ = MPI_REQUEST_NULL;
  int started_sends_ = 0;
  int armed_receives_ = 0;
  int next_receive_ = 0;
  std::string error_;
};

bool MpiPersistentLink::check(int code, const char* call) {
  if (code == MPI_SUCCESS) return true;
  error_ = describe_mpi_failure(code, call);
  return false;
}

void MpiPersistentLink::free_requests() {
  for (MPI_Request& request : sends_) MPI_Request_free(&request);
  for (MPI_Request& request : receives_) MPI_Request_free(&request);
  sends_.clear();
  receives_.clear();
  if (acknowledgement_send_ != MPI_REQUEST_NULL) MPI_Request_free(&acknowledgement_send_);
  if (acknowledgement_receive_ != MPI_REQUEST_NULL) MPI_Request_free(&acknowledgement_receive_);
}

// A window of persistent sends and receives of `bytes`, and the 1-byte acknowledgements.
bool MpiPersistentLink::prepare(std::size_t bytes) {
  free_requests();
  prepared_bytes_ = bytes;
  int peer = 1 - rank_;
  int count = static_cast<int>(bytes);
  sends_.assign(static_cast<std::size_t>(window_), MPI_REQUEST_NULL);
  receives_.assign(static_cast<std::size_t>(window_), MPI_REQUEST_NULL);
  for (int k = 0; k < window_; ++k) {
    auto index = static_cast<std::size_t>(k);
    if (!check(MPI_Send_init(send_buffer_, count, MPI_BYTE, peer, kDataTag, MPI_COMM_WORLD, &sends_[index]),
               "MPI_Send_init") ||
        !check(MPI_Recv_init(receive_buffer_, count, MPI_BYTE, peer, kDataTag, MPI_COMM_WORLD, &receives_[index]),
               "MPI_Recv_init"))
      return false;
  }
  return check(MPI_Send_init(acknowledgement_, 1, MPI_BYTE, peer, kAcknowledgementTag, MPI_COMM_WORLD,
                             &acknowledgement_send_), "MPI_Send_init") &&
         check(MPI_Recv_init(acknowledgement_, 1, MPI_BYTE, peer, kAcknowledgementTag, MPI_COMM_WORLD,
                             &acknowledgement_receive_), "MPI_Recv_init");
}

bool MpiPersistentLink::expect(int count) {
  armed_receives_ = count;
  next_receive_ = 0;
  return check(MPI_Startall(count, receives_.data()), "MPI_Startall");
}

bool MpiPersistentLink::start(std::size_t bytes) {
  if (bytes != prepared_bytes_ || started_sends_ >= window_) {
    error_ = fmt::format("start({}) on requests made for {} bytes, {} of {} started", bytes, prepared_bytes_,
                         started_sends_, window_);
    return false;
  }
  return check(MPI_Start(&sends_[static_cast<std::size_t>(started_sends_++)]), "MPI_Start");
}

bool MpiPersistentLink::complete_sends() {
  int count = std::exchange(started_sends_, 0);
  return check(MPI_Waitall(count, sends_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

bool MpiPersistentLink::receive(std::span<const std::byte>& message) {
  if (next_receive_ >= armed_receives_) {
    error_ = "receive() with no receive started";
    return false;
  }
  MPI_Status status;
  if (!check(MPI_Wait(&receives_[static_cast<std::size_t>(next_receive_++)], &status), "MPI_Wait")) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  message = {receive_buffer_, static_cast<std::size_t>(count)};
  return true;
}

bool MpiPersistentLink::start_and_wait(MPI_Request& request, const char* what) {
  return check(MPI_Start(&request), what) && check(MPI_Wait(&request, MPI_STATUS_IGNORE), what);
}

ReportSettings report_settings(const PersistOptions& options) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string library(version, static_cast<std::size_t>(length));
  ReportSettings settings;
  settings.program = "tether-mpi-bench-persist";
  settings.transport = library.substr(0, library.find(','));
  settings.apis.push_back({"persistent", "Open MPI persistent request",
                           fmt::format("MPI_Send_init/MPI_Recv_init once per size, MPI_Start(all)/MPI_Wait(all), "
                                       "window {}, malloc'd buffers", options.window)});
  return settings;
}

bool measure_size(MpiPersistentLink& link, const PersistOptions& options, std::size_t bytes, bool corrupt,
                  std::vector<Figure>& figures, Failure& failure) {
  Figure figure{"persistent", bytes};
  bool ok = measure_persistent(link, loop_options(options, Test::latency), bytes, corrupt, failure, figure.latency_us) &&
            measure_persistent(link, loop_options(options, Test::bandwidth), bytes, false, failure,
                               figure.bandwidth_mbs);
  if (ok) figures.push_back(figure);
  return ok;
}

// Every size on ranks 0 and 1 (others join the barriers); rank 0 prints. Exit code.
int run_with_mpi(const PersistOptions& options, const char* program) {
  MpiPersistentLink link(options.window, largest_size(options));
  if (!link.ok()) {
    fmt::print(stderr, "{}: no {}-byte buffers\n", program, largest_size(options));
    return 1;
  }
  std::vector<Figure> figures;
  bool corrupt = options.corrupt_first_message;
  for (std::size_t bytes : options.sizes_bytes) {
    MPI_Barrier(MPI_COMM_WORLD);
    Failure failure;
    if (link.rank() <= 1 && !measure_size(link, options, bytes, std::exchange(corrupt, false), figures, failure)) {
      fmt::print(stderr, "{}: rank {}: at {} bytes: {}\n", program, link.rank(), bytes, failure.why);
      return 1;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (link.rank() == 0) print_report(options, report_settings(options), figures);
  return 0;
}

int mpi_bench_persist_main(int argc, char** argv) {
  int exit_code = 0;
  auto options = parse_persist_options(argc, argv, exit_code);
  if (!options) return exit_code;
  if (largest_size(*options) > static_cast<std::size_t>(2147483647)) {
    fmt::print(stderr, "{}: sizes above 2 GiB do not fit an MPI count; pass smaller --sizes\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    fmt::print(stderr, "{}: needs 2 ranks, got {}: launch with mpirun -n 2 {}\n", argv[0], size, argv[0]);
    MPI_Finalize();
    return 2;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  exit_code = run_with_mpi(*options, argv[0]);
  if (exit_code != 0) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  return exit_code;
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) { return tether::bench::mpi_bench_persist_main(argc, argv); }
