// The benchmark endpoint over tether::Runtime, and the main of tether-pingpong/tether-bw.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/bench/bench_options.hpp"
#include "tether/runtime.hpp"

namespace tether::bench {

class TetherEndpoint {
 public:
  TetherEndpoint(Runtime& runtime, bool user_buffers) : runtime_(runtime), user_buffers_(user_buffers) {}

  [[nodiscard]] int rank() const { return runtime_.rank(); }
  [[nodiscard]] bool send(const void* data, std::size_t bytes, int peer);
  [[nodiscard]] bool receive(void* buffer, std::size_t bytes, int peer);
  [[nodiscard]] bool send_window(const void* data, std::size_t bytes, int peer, int count);
  [[nodiscard]] bool receive_window(void* buffer, std::size_t bytes, int peer, int count);
  [[nodiscard]] bool barrier();
  [[nodiscard]] void* allocate(std::size_t bytes);
  void release(void* buffer);
  [[nodiscard]] std::string error() const { return error_; }

 private:
  bool finish_send(Request& request);
  bool finish_receive(Request& request, std::size_t expected_bytes);
  bool fail(std::string why);

  Runtime& runtime_;
  bool user_buffers_;
  std::vector<Request> window_;
  std::vector<MessageInfo> window_infos_;
  std::string error_;
};

// Starts the runtime of a two-rank benchmark, or says why not (exit code in `exit_code`).
std::unique_ptr<Runtime> start_two_rank_runtime(const char* program, int& exit_code);

// Starts the runtime and runs the latency or bandwidth test; returns the exit code.
int tether_app_main(int argc, char** argv, Test test);

}  // namespace tether::bench
