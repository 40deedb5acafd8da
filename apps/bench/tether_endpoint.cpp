// TetherEndpoint: blocking and windowed transfers made of isend/irecv and wait/wait_all.
#include "apps/bench/tether_endpoint.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "apps/bench/bench_loops.hpp"
#include "tether/pool.hpp"

namespace tether::bench {
namespace {
constexpr int kBenchTag = 1;
}

bool TetherEndpoint::fail(std::string why) {
  error_ = std::move(why);
  return false;
}

bool TetherEndpoint::finish_send(Request& request) {
  return runtime_.wait(request) == Status::done ? true : fail(runtime_.last_error().message());
}

// A receive must have landed `expected_bytes` whole.
bool TetherEndpoint::finish_receive(Request& request, std::size_t expected_bytes) {
  MessageInfo info;
  if (runtime_.wait(request, &info) != Status::done) return fail(runtime_.last_error().message());
  if (info.received_bytes != expected_bytes)
    return fail(fmt::format("{} bytes landed where {} were expected", info.received_bytes, expected_bytes));
  return true;
}

bool TetherEndpoint::send(const void* data, std::size_t bytes, int peer) {
  Request request;
  if (runtime_.isend(data, bytes, peer, kBenchTag, request) == Status::error)
    return fail(runtime_.last_error().message());
  return finish_send(request);
}

bool TetherEndpoint::receive(void* buffer, std::size_t bytes, int peer) {
  Request request;
  if (runtime_.irecv(buffer, bytes, peer, kBenchTag, request) == Status::error)
    return fail(runtime_.last_error().message());
  return finish_receive(request, bytes);
}

bool TetherEndpoint::send_window(const void* data, std::size_t bytes, int peer, int count) {
  window_.assign(static_cast<std::size_t>(count), Request{});
  for (Request& request : window_)
    if (runtime_.isend(data, bytes, peer, kBenchTag, request) == Status::error)
      return fail(runtime_.last_error().message());
  if (runtime_.wait_all(window_) != Status::done) return fail(runtime_.last_error().message());
  return true;
}

bool TetherEndpoint::receive_window(void* buffer, std::size_t bytes, int peer, int count) {
  window_.assign(static_cast<std::size_t>(count), Request{});
  window_infos_.assign(static_cast<std::size_t>(count), MessageInfo{});
  for (Request& request : window_)
    if (runtime_.irecv(buffer, bytes, peer, kBenchTag, request) == Status::error)
      return fail(runtime_.last_error().message());
  if (runtime_.wait_all(window_, window_infos_) != Status::done) return fail(runtime_.last_error().message());
  for (const MessageInfo& info : window_infos_)
    if (info.received_bytes != bytes)
      return fail(fmt::format("{} bytes landed where {} were expected", info.received_bytes, bytes));
  return true;
}

bool TetherEndpoint::barrier() {
  auto done = runtime_.barrier();
  return done ? true : fail(done.error().message());
}

void* TetherEndpoint::allocate(std::size_t bytes) {
  if (user_buffers_) {
    void* buffer = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (buffer == nullptr) fail(fmt::format("malloc of {} bytes failed", bytes));
    return buffer;
  }
  void* buffer = pinned_alloc(bytes, 64);
  if (buffer == nullptr) fail(pinned_last_error().message());
  return buffer;
}

void TetherEndpoint::release(void* buffer) {
  if (user_buffers_) std::free(buffer);
  else pinned_free(buffer);
}

std::unique_ptr<Runtime> start_two_rank_runtime(const char* program, int& exit_code) {
  auto runtime = Runtime::start();
  if (!runtime) {
    fmt::print(stderr, "{}: {}\n", program, runtime.error().message());
    exit_code = 1;
    return nullptr;
  }
  if ((*runtime)->size() < 2) {
    fmt::print(stderr, "{}: needs 2 ranks, got {}: launch with tether-run -n 2 {}\n", program, (*runtime)->size(), program);
    exit_code = 2;
    return nullptr;
  }
  return std::move(*runtime);
}

int tether_app_main(int argc, char** argv, Test test) {
  int exit_code = 0;
  auto options = parse_options(argc, argv, test, exit_code);
  if (!options) return exit_code;
  auto runtime = start_two_rank_runtime(argv[0], exit_code);
  if (!runtime) return exit_code;
  TetherEndpoint endpoint(*runtime, options->user_buffers);
  return run_benchmark(endpoint, *options, "tether", argv[0]);
}

}  // namespace tether::bench
